// Precompiled for each sim/ library (meson's cpp_pch): the standard and third-party headers most
// of their files include, parsed once per library instead of once per file. Nothing of meshsim's
// own belongs here, so that every file still includes what it uses. (No include guard: it is
// compiled as a file of its own.)

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
