#include "elasticdl/zoo/params.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/strings.h"

namespace elasticdl {
namespace {

bool IsIdentifierStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)); }
// Characters that end a bare word.
bool IsDelimiter(char c) {
  return c == ',' || c == '=' || c == '[' || c == ']' || c == '\'' || c == '"' || IsSpace(c);
}

// A bare word is a boolean, an integer, a float, or else a string.
Params::Value ClassifyWord(const std::string& word) {
  if (word == "true" || word == "True") return true;
  if (word == "false" || word == "False") return false;
  int64_t i;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), i);
  if (ec == std::errc() && end == word.data() + word.size()) return i;
  char* dend = nullptr;
  errno = 0;
  double d = std::strtod(word.c_str(), &dend);
  if (dend == word.c_str() + word.size() && errno == 0) return d;
  return word;
}

// Recursive descent over the --params text. Errors name the 1-based column
// and the key being parsed.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  StatusOr<Params> Parse() {
    Params params;
    SkipSpace();
    while (!AtEnd()) {
      size_t key_pos = pos_;
      key_.clear();
      while (!AtEnd() && IsIdentifierChar(Peek())) key_ += text_[pos_++];
      if (key_.empty() || !IsIdentifierStart(key_[0])) {
        pos_ = key_pos;
        key_.clear();
        return Error("expected a key");
      }
      if (params.contains(key_)) {
        pos_ = key_pos;
        return Error("duplicate key");
      }
      SkipSpace();
      if (!Consume('=')) return Error("expected '=' after the key");
      EDL_ASSIGN_OR_RETURN(Params::Value value, ParseValue());
      params.set(key_, std::move(value));
      SkipSpace();
      if (AtEnd()) break;
      if (!Consume(',')) return Error("expected ',' between parameters");
      SkipSpace();
      if (AtEnd()) return Error("expected a key after ','");
    }
    return params;
  }

 private:
  StatusOr<Params::Value> ParseValue() {
    SkipSpace();
    if (AtEnd()) return Error("expected a value");
    if (Peek() == '[') return ParseList();
    return ParseScalar();
  }

  StatusOr<Params::Value> ParseScalar() {
    if (Peek() == '\'' || Peek() == '"') {
      EDL_ASSIGN_OR_RETURN(std::string s, ParseQuoted());
      return Params::Value(std::move(s));
    }
    std::string word;
    while (!AtEnd() && !IsDelimiter(Peek())) word += text_[pos_++];
    if (word.empty()) return Error("expected a value");
    return ClassifyWord(word);
  }

  StatusOr<std::string> ParseQuoted() {
    const char quote = text_[pos_++];
    std::string s;
    while (!AtEnd() && Peek() != quote) {
      if (Peek() == '\\' && pos_ + 1 < text_.size()) ++pos_;
      s += text_[pos_++];
    }
    if (!Consume(quote)) return Error(StrCat("unterminated string (missing ", quote, ")"));
    return s;
  }

  // A list holds integers, numbers (integers and floats: all floats) or
  // strings. An empty list is an empty integer list.
  StatusOr<Params::Value> ParseList() {
    Consume('[');
    std::vector<Params::Value> items;
    SkipSpace();
    while (!Consume(']')) {
      if (AtEnd()) return Error("unterminated list (missing ])");
      if (!items.empty()) {
        if (!Consume(',')) return Error("expected ',' or ']' in the list");
        SkipSpace();
      }
      if (!AtEnd() && Peek() == '[') return Error("lists do not nest");
      EDL_ASSIGN_OR_RETURN(Params::Value item, ParseValue());
      if (std::holds_alternative<bool>(item)) return Error("lists hold numbers or strings");
      items.push_back(std::move(item));
      SkipSpace();
    }
    bool all_int = true, all_number = true, all_string = true;
    for (const Params::Value& v : items) {
      all_int &= std::holds_alternative<int64_t>(v);
      all_number &= std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v);
      all_string &= std::holds_alternative<std::string>(v);
    }
    if (all_int) {
      std::vector<int64_t> out;
      for (const Params::Value& v : items) out.push_back(std::get<int64_t>(v));
      return Params::Value(std::move(out));
    }
    if (all_number) {
      std::vector<double> out;
      for (const Params::Value& v : items) {
        out.push_back(std::holds_alternative<double>(v)
                          ? std::get<double>(v)
                          : static_cast<double>(std::get<int64_t>(v)));
      }
      return Params::Value(std::move(out));
    }
    if (all_string) {
      std::vector<std::string> out;
      for (Params::Value& v : items) out.push_back(std::move(std::get<std::string>(v)));
      return Params::Value(std::move(out));
    }
    return Error("a list mixes numbers and strings");
  }

  Status Error(std::string_view what) const {
    std::string where = key_.empty() ? "" : StrCat(" (key '", key_, "')");
    return absl::InvalidArgumentError(
        StrCat("--params: ", what, " at column ", pos_ + 1, where, " in \"", text_, "\""));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }
  bool Consume(char c) {
    if (AtEnd() || Peek() != c) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (!AtEnd() && IsSpace(Peek())) ++pos_;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string key_;  // the key being parsed, for messages
};

const char* TypeName(const Params::Value& v) {
  static constexpr const char* kNames[] = {"a boolean",    "an integer",      "a float",
                                           "a string",     "an integer list", "a float list",
                                           "a string list"};
  return kNames[v.index()];
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

// Shortest text that reads back as the same double (and as a double).
std::string FormatDouble(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // "n": inf, nan
  return s;
}

template <typename T>
std::string FormatList(const std::vector<T>& items, std::string (*format)(const T&)) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += format(items[i]);
  }
  return out + "]";
}

std::string FormatValue(const Params::Value& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return FormatDouble(d); }
    std::string operator()(const std::string& s) const { return Quote(s); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return FormatList<int64_t>(v, [](const int64_t& i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<double>& v) const {
      return FormatList<double>(v, [](const double& d) { return FormatDouble(d); });
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return FormatList<std::string>(v, [](const std::string& s) { return Quote(s); });
    }
  };
  return std::visit(Visitor(), value);
}

template <typename Int>
Int CheckedInt(const std::string& key, int64_t v) {
  if (v < std::numeric_limits<Int>::min() || v > std::numeric_limits<Int>::max()) {
    throw std::invalid_argument(
        StrCat("--params: '", key, "' = ", v, " is out of range for a 32-bit integer"));
  }
  return static_cast<Int>(v);
}

}  // namespace

StatusOr<Params> Params::Parse(std::string_view text) { return Parser(text).Parse(); }

const Params::Value* Params::Find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

void Params::TypeError(const std::string& key, const char* expected) const {
  const Value& v = values_.at(key);
  throw std::invalid_argument(StrCat("--params: '", key, "' is ", TypeName(v), " (", FormatValue(v),
                                     "), expected ", expected));
}

std::string Params::ToString() const {
  std::string out;
  for (const auto& [key, value] : values_) {
    if (!out.empty()) out += ", ";
    out += key + "=" + FormatValue(value);
  }
  return out;
}

namespace internal {

bool ParamsAccess<bool>::Get(const Params& params, const std::string& key, const Params::Value& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  params.TypeError(key, "a boolean");
}

int64_t ParamsAccess<int64_t>::Get(const Params& params, const std::string& key,
                                   const Params::Value& v) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) return *i;
  params.TypeError(key, "an integer");
}

int ParamsAccess<int>::Get(const Params& params, const std::string& key, const Params::Value& v) {
  return CheckedInt<int>(key, ParamsAccess<int64_t>::Get(params, key, v));
}

double ParamsAccess<double>::Get(const Params& params, const std::string& key,
                                 const Params::Value& v) {
  if (const double* d = std::get_if<double>(&v)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  params.TypeError(key, "a number");
}

float ParamsAccess<float>::Get(const Params& params, const std::string& key,
                               const Params::Value& v) {
  return static_cast<float>(ParamsAccess<double>::Get(params, key, v));
}

std::string ParamsAccess<std::string>::Get(const Params& params, const std::string& key,
                                           const Params::Value& v) {
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  params.TypeError(key, "a string");
}

// An empty list parses as an empty integer list; it reads as any list type.
std::vector<int64_t> ParamsAccess<std::vector<int64_t>>::Get(const Params& params,
                                                             const std::string& key,
                                                             const Params::Value& v) {
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) return *l;
  params.TypeError(key, "an integer list");
}

std::vector<int> ParamsAccess<std::vector<int>>::Get(const Params& params, const std::string& key,
                                                     const Params::Value& v) {
  std::vector<int> out;
  for (int64_t i : ParamsAccess<std::vector<int64_t>>::Get(params, key, v)) {
    out.push_back(CheckedInt<int>(key, i));
  }
  return out;
}

std::vector<double> ParamsAccess<std::vector<double>>::Get(const Params& params,
                                                           const std::string& key,
                                                           const Params::Value& v) {
  if (const auto* l = std::get_if<std::vector<double>>(&v)) return *l;
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) return {l->begin(), l->end()};
  params.TypeError(key, "a list of numbers");
}

std::vector<float> ParamsAccess<std::vector<float>>::Get(const Params& params,
                                                         const std::string& key,
                                                         const Params::Value& v) {
  std::vector<double> d = ParamsAccess<std::vector<double>>::Get(params, key, v);
  return {d.begin(), d.end()};
}

std::vector<std::string> ParamsAccess<std::vector<std::string>>::Get(const Params& params,
                                                                     const std::string& key,
                                                                     const Params::Value& v) {
  if (const auto* l = std::get_if<std::vector<std::string>>(&v)) return *l;
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v); l != nullptr && l->empty()) return {};
  params.TypeError(key, "a string list");
}

}  // namespace internal
}  // namespace elasticdl
