// toml++'s parser, compiled into meshsim instead of linked from Debian's prebuilt library, so that
// it is built with the project's flags: the sanitizer builds instrument the code that reads
// untrusted scenario bytes, and the fuzzers see its coverage.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
