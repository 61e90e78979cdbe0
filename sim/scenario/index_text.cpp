#include "sim/scenario/index_text.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

// [begin, end) of the text, blanks trimmed from both ends.
struct Span {
  size_t begin;
  size_t end;
};

Span trimmed(std::string_view text, Span s) {
  while (s.begin < s.end && (text[s.begin] == ' ' || text[s.begin] == '\t')) ++s.begin;
  while (s.end > s.begin && (text[s.end - 1] == ' ' || text[s.end - 1] == '\t')) --s.end;
  return s;
}

// Splits `s` at each `separator` outside parentheses and brackets.
std::vector<Span> split_top_level(std::string_view text, Span s, char separator) {
  std::vector<Span> out;
  int depth = 0;
  size_t from = s.begin;
  for (size_t i = s.begin; i < s.end; ++i) {
    const char c = text[i];
    if (c == '(' || c == '[') ++depth;
    if ((c == ')' || c == ']') && depth > 0) --depth;
    if (c == separator && depth == 0) {
      out.push_back({from, i});
      from = i + 1;
    }
  }
  out.push_back({from, s.end});
  return out;
}

IndexText::Located expression_at(std::string_view text, Span s) {
  try {
    return {Expression::parse(text.substr(s.begin, s.end - s.begin)), s.begin};
  } catch (const ExpressionError& e) {
    throw ExpressionError(s.begin + e.offset(), e.what());
  }
}

std::optional<IndexText::Located> optional_expression_at(std::string_view text, Span s) {
  s = trimmed(text, s);
  if (s.begin == s.end) return std::nullopt;
  return expression_at(text, s);
}

}  // namespace

IndexText IndexText::parse(std::string_view text) {
  IndexText out;
  out.text_ = std::string(text);
  const Span all = trimmed(text, {0, text.size()});
  if (all.end - all.begin < 2 || text[all.begin] != '[' || text[all.end - 1] != ']') {
    throw ExpressionError(all.begin,
                          "an index is written in brackets as Python writes it, such as "
                          "\"[:, ::2]\" or \"[rank % 2, ..., None]\"");
  }
  std::vector<Span> entries = split_top_level(text, {all.begin + 1, all.end - 1}, ',');
  out.tuple_ = entries.size() > 1;
  // Python allows one trailing comma, which makes a tuple: t[1,] is t[(1,)].
  const Span last = trimmed(text, entries.back());
  if (entries.size() > 1 && last.begin == last.end) entries.pop_back();
  if (entries.size() > kMaxEntries) {
    throw ExpressionError(entries[kMaxEntries].begin,
                          fmt::format("an index of more than {} entries", kMaxEntries));
  }
  for (const Span& raw : entries) {
    const Span s = trimmed(text, raw);
    const std::string_view entry = text.substr(s.begin, s.end - s.begin);
    Part part;
    if (entry.empty()) {
      throw ExpressionError(s.begin, "an empty entry in an index (write ':' for a whole dim)");
    }
    if (entry == "...") {
      part.kind = IndexEntry::Kind::kEllipsis;
    } else if (entry == "None") {
      part.kind = IndexEntry::Kind::kNone;
    } else {
      const std::vector<Span> bounds = split_top_level(text, s, ':');
      if (bounds.size() == 1) {
        part.kind = IndexEntry::Kind::kInteger;
        part.integer = expression_at(text, s);
      } else if (bounds.size() <= 3) {
        part.kind = IndexEntry::Kind::kSlice;
        part.start = optional_expression_at(text, bounds[0]);
        part.stop = optional_expression_at(text, bounds[1]);
        if (bounds.size() == 3) part.step = optional_expression_at(text, bounds[2]);
      } else {
        throw ExpressionError(bounds[3].begin - 1,
                              "a slice has at most two colons (start:stop:step)");
      }
    }
    out.parts_.push_back(std::move(part));
  }
  return out;
}

void IndexText::check(const ExpressionSchema& schema) const {
  for (const Part& p : parts_) {
    for (const std::optional<Located>* e : {&p.integer, &p.start, &p.stop, &p.step}) {
      if (!*e) continue;
      try {
        (*e)->expression.check(schema);
      } catch (const ExpressionError& error) {
        throw ExpressionError((*e)->offset + error.offset(), error.what());
      }
    }
  }
}

std::vector<IndexEntry> IndexText::evaluate(const ExpressionEnv& env) const {
  std::vector<IndexEntry> out;
  out.reserve(parts_.size());
  for (const Part& p : parts_) {
    IndexEntry e;
    e.kind = p.kind;
    if (p.integer) e.integer = p.integer->expression.evaluate(env);
    if (p.start) e.start = p.start->expression.evaluate(env);
    if (p.stop) e.stop = p.stop->expression.evaluate(env);
    if (p.step) e.step = p.step->expression.evaluate(env);
    out.push_back(e);
  }
  return out;
}

}  // namespace meshsim::sim
