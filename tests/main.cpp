// Catch2 v2 entry point (Debian 12 ships the single-header v2, which needs a defined main).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
