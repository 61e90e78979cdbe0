// Precompiled for the model library (meson's cpp_pch): the standard and third-party headers most
// of its files include, parsed once instead of once per file. Nothing of meshsim's own belongs
// here, so that every file still includes what it uses.

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
