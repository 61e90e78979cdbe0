#include "src/io/xml_guard.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

namespace {

struct Tag {
  bool closing = false;
  std::string_view name;
  size_t at = 0;  // byte offset of its '<'
  bool operator==(const Tag& o) const { return closing == o.closing && name == o.name; }
};

// Every tag's name; nullopt-like empty result with `bad_at` set for a tag that never ends.
std::vector<Tag> tags_of(std::string_view xml, std::string_view what) {
  std::vector<Tag> out;
  size_t at = 0;
  while ((at = xml.find('<', at)) != std::string_view::npos) {
    Tag t;
    t.at = at;
    size_t start = at + 1;
    if (start < xml.size() && xml[start] == '/') {
      t.closing = true;
      ++start;
    }
    size_t end = start;
    while (end < xml.size() && xml[end] != '>' && xml[end] != ' ' && xml[end] != '\t' &&
           xml[end] != '\n' && xml[end] != '\r' && xml[end] != '/') {
      ++end;
    }
    if (end == xml.size()) {
      throw runtime_error(
          fmt::format("corrupt {} record (xml archive): the tag at byte {} never ends", what, at));
    }
    t.name = xml.substr(start, end - start);
    out.push_back(t);
    at = end;
  }
  return out;
}

std::string shown(const Tag& t) {
  return fmt::format("<{}{}>", t.closing ? "/" : "", t.name.substr(0, 40));
}

}  // namespace

void check_xml_tags(std::string_view payload, std::string_view reference, std::string_view what) {
  const std::vector<Tag> got = tags_of(payload, what);
  const std::vector<Tag> want = tags_of(reference, what);
  for (size_t i = 0; i < got.size() || i < want.size(); ++i) {
    if (i >= got.size()) {
      throw runtime_error(
          fmt::format("corrupt {} record (xml archive): it ends before {}", what, shown(want[i])));
    }
    if (i >= want.size() || !(got[i] == want[i])) {
      throw runtime_error(fmt::format(
          "corrupt {} record (xml archive): {} at byte {} where {} belongs", what, shown(got[i]),
          got[i].at, i < want.size() ? shown(want[i]) : std::string("nothing")));
    }
  }
}

}  // namespace meshsim
