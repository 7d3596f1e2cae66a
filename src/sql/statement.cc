#include "sql/statement.h"

#include <absl/strings/match.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <utility>

#include "common/strings.h"

namespace elasticdl::sql {

namespace {

struct Token {
  enum class Kind { kWord, kNumber, kString, kQuotedName, kPunct, kEnd };
  Kind kind = Kind::kEnd;
  // Words and numbers as written; strings and quoted names unquoted;
  // punctuation as its character.
  std::string text;
  size_t position = 0;
};

bool IsWordStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

bool SameWord(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(absl::string_view(a.data(), a.size()),
                                absl::string_view(b.data(), b.size()));
}

// "line 2, column 7", and the line with a caret under the column.
std::string Where(std::string_view text, size_t position) {
  position = std::min(position, text.size());
  const size_t line_start = text.rfind('\n', position == 0 ? 0 : position - 1);
  const size_t begin = (line_start == std::string_view::npos || position == 0) ? 0 : line_start + 1;
  size_t end = text.find('\n', begin);
  if (end == std::string_view::npos) end = text.size();
  const size_t line = 1 + std::count(text.begin(), text.begin() + begin, '\n');
  const size_t column = position - begin + 1;
  return StrCat("line ", line, ", column ", column, "\n  ", text.substr(begin, end - begin), "\n  ",
                std::string(column - 1, ' '), "^");
}

Status SyntaxError(std::string_view text, size_t position, std::string_view what) {
  return absl::InvalidArgumentError(StrCat("syntax error: ", what, ", at ", Where(text, position)));
}

// The statement's tokens, ending with a kEnd token at the end of the text.
StatusOr<std::vector<Token>> Tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (text.substr(i, 2) == "--") {
      const size_t end = text.find('\n', i);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (text.substr(i, 2) == "/*") {
      const size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) return SyntaxError(text, i, "unterminated comment");
      i = end + 2;
    } else if (c == '\'' || c == '"' || c == '`') {
      // SQL doubles a quote inside a string: 'it''s'.
      Token token{c == '\'' ? Token::Kind::kString : Token::Kind::kQuotedName, "", i};
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= text.size()) {
          return SyntaxError(text, i,
                             c == '\'' ? "unterminated string" : "unterminated quoted name");
        }
        if (text[j] == c) {
          if (j + 1 < text.size() && text[j + 1] == c) {
            token.text += c;
            ++j;
            continue;
          }
          break;
        }
        token.text += text[j];
      }
      tokens.push_back(std::move(token));
      i = j + 1;
    } else if (IsWordStart(c)) {
      size_t j = i;
      while (j < text.size() && IsWordChar(text[j])) ++j;
      tokens.push_back({Token::Kind::kWord, std::string(text.substr(i, j - i)), i});
      i = j;
    } else if (IsDigit(c) || (c == '.' && i + 1 < text.size() && IsDigit(text[i + 1]))) {
      size_t j = i;
      while (j < text.size() && IsDigit(text[j])) ++j;
      if (j < text.size() && text[j] == '.') {
        ++j;
        while (j < text.size() && IsDigit(text[j])) ++j;
      }
      if (j < text.size() && (text[j] == 'e' || text[j] == 'E')) {
        size_t k = j + 1;
        if (k < text.size() && (text[k] == '+' || text[k] == '-')) ++k;
        if (k < text.size() && IsDigit(text[k])) {
          j = k;
          while (j < text.size() && IsDigit(text[j])) ++j;
        }
      }
      if (j < text.size() && IsWordChar(text[j])) {
        return SyntaxError(text, i, "a number runs into a name");
      }
      tokens.push_back({Token::Kind::kNumber, std::string(text.substr(i, j - i)), i});
      i = j;
    } else {
      tokens.push_back({Token::Kind::kPunct, std::string(1, c), i});
      ++i;
    }
  }
  tokens.push_back({Token::Kind::kEnd, "", text.size()});
  return tokens;
}

std::string Describe(const Token& token) {
  switch (token.kind) {
    case Token::Kind::kEnd:
      return "the end of the statement";
    case Token::Kind::kString:
      return StrCat("'", token.text, "'");
    case Token::Kind::kQuotedName:
      return StrCat("\"", token.text, "\"");
    default:
      return StrCat("'", token.text, "'");
  }
}

// Parses the clause that starts at a TRAIN or PREDICT token.
class ClauseParser {
 public:
  ClauseParser(std::string_view text, const std::vector<Token>& tokens, size_t start)
      : text_(text), tokens_(tokens), i_(start) {}

  Status Parse(Statement* statement) {
    if (SameWord(Peek().text, "TRAIN")) {
      statement->kind = Statement::Kind::kTrain;
      return ParseTrain(&statement->train);
    }
    statement->kind = Statement::Kind::kPredict;
    return ParsePredict(&statement->predict);
  }

  // Where parsing stopped: how far the clause made sense.
  size_t position() const { return Peek().position; }

 private:
  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(i_ + ahead, tokens_.size() - 1)];
  }
  bool AtKeyword(std::string_view word) const {
    return Peek().kind == Token::Kind::kWord && SameWord(Peek().text, word) &&
           !(Peek(1).kind == Token::Kind::kPunct && Peek(1).text == ".");
  }
  bool AtPunct(std::string_view p) const {
    return Peek().kind == Token::Kind::kPunct && Peek().text == p;
  }
  Status Expected(std::string_view what) const {
    return SyntaxError(text_, Peek().position,
                       StrCat("expected ", what, ", found ", Describe(Peek())));
  }
  Status Keyword(std::string_view word) {
    if (!AtKeyword(word)) return Expected(word);
    ++i_;
    return absl::OkStatus();
  }

  // The keywords that may follow a WITH value: no value names, unless quoted
  // or dotted ("x= INTO m" lacks a value). Names elsewhere may be anything:
  // LABEL label is a column named label.
  bool AtClauseKeyword() const {
    for (std::string_view word : {"WITH", "COLUMN", "LABEL", "INTO", "USING"}) {
      if (AtKeyword(word)) return true;
    }
    return false;
  }

  // name ("." name)*: a model, table, column or attribute name.
  Status DottedName(std::string_view what, std::string* name, size_t* position = nullptr) {
    if (Peek().kind != Token::Kind::kWord && Peek().kind != Token::Kind::kQuotedName) {
      return Expected(what);
    }
    if (position != nullptr) *position = Peek().position;
    *name = Peek().text;
    ++i_;
    while (AtPunct(".")) {
      ++i_;
      if (Peek().kind != Token::Kind::kWord && Peek().kind != Token::Kind::kQuotedName) {
        return Expected(StrCat("a name after '", *name, ".'"));
      }
      *name += "." + Peek().text;
      ++i_;
    }
    return absl::OkStatus();
  }

  Status ParseValue(Value* value, int depth = 0) {
    value->position = Peek().position;
    if (AtPunct("[")) {
      if (depth > 16) return SyntaxError(text_, Peek().position, "lists nested too deep");
      ++i_;
      value->kind = Value::Kind::kList;
      if (AtPunct("]")) {
        ++i_;
        return absl::OkStatus();
      }
      for (;;) {
        Value item;
        EDL_RETURN_IF_ERROR(ParseValue(&item, depth + 1));
        value->items.push_back(std::move(item));
        if (AtPunct("]")) {
          ++i_;
          return absl::OkStatus();
        }
        if (!AtPunct(",")) return Expected("',' or ']' in the list");
        ++i_;
      }
    }
    std::string sign;
    if ((AtPunct("-") || AtPunct("+")) && Peek(1).kind == Token::Kind::kNumber &&
        Peek(1).position == Peek().position + 1) {
      sign = Peek().text == "-" ? "-" : "";
      ++i_;
    }
    switch (Peek().kind) {
      case Token::Kind::kNumber: {
        const std::string& number = Peek().text;
        const bool integral = number.find_first_of(".eE") == std::string::npos;
        value->kind = integral ? Value::Kind::kInt : Value::Kind::kFloat;
        value->text = sign + number;
        ++i_;
        return absl::OkStatus();
      }
      case Token::Kind::kString:
      case Token::Kind::kQuotedName:
        value->kind = Value::Kind::kString;
        value->text = Peek().text;
        ++i_;
        return absl::OkStatus();
      case Token::Kind::kWord:
        if (AtClauseKeyword()) break;
        value->kind = Value::Kind::kName;
        return DottedName("a value", &value->text);
      default:
        break;
    }
    return Expected("a value (a number, a 'string', a name or a [list])");
  }

  // WITH key=value (, key=value)*
  Status ParseAttributes(std::vector<Attribute>* attributes) {
    EDL_RETURN_IF_ERROR(Keyword("WITH"));
    std::set<std::string> seen;
    for (;;) {
      Attribute attribute;
      EDL_RETURN_IF_ERROR(DottedName("an attribute name", &attribute.key, &attribute.position));
      if (!seen.insert(attribute.key).second) {
        return SyntaxError(text_, attribute.position,
                           StrCat("attribute '", attribute.key, "' is given twice"));
      }
      if (!AtPunct("=")) return Expected(StrCat("'=' after '", attribute.key, "'"));
      ++i_;
      EDL_RETURN_IF_ERROR(ParseValue(&attribute.value));
      attributes->push_back(std::move(attribute));
      if (!AtPunct(",")) return absl::OkStatus();
      ++i_;
    }
  }

  Status End() {
    if (AtPunct(";")) ++i_;
    if (Peek().kind != Token::Kind::kEnd) return Expected("the end of the statement");
    return absl::OkStatus();
  }

  Status ParseTrain(TrainClause* train) {
    EDL_RETURN_IF_ERROR(Keyword("TRAIN"));
    EDL_RETURN_IF_ERROR(DottedName("a model name after TRAIN", &train->model));
    if (AtKeyword("WITH")) EDL_RETURN_IF_ERROR(ParseAttributes(&train->attributes));
    if (AtKeyword("COLUMN")) {
      ++i_;
      for (;;) {
        std::string column;
        EDL_RETURN_IF_ERROR(DottedName("a column name", &column));
        train->columns.push_back(std::move(column));
        if (!AtPunct(",")) break;
        ++i_;
      }
    }
    if (AtKeyword("LABEL")) {
      ++i_;
      EDL_RETURN_IF_ERROR(DottedName("the label's column name", &train->label));
    }
    if (!AtKeyword("INTO")) {
      if (train->label.empty() && train->columns.empty() && train->attributes.empty()) {
        return Expected("WITH, COLUMN, LABEL or INTO");
      }
      return Expected(train->label.empty() ? "LABEL or INTO" : "INTO");
    }
    ++i_;
    EDL_RETURN_IF_ERROR(DottedName("the trained model's name after INTO", &train->into));
    return End();
  }

  Status ParsePredict(PredictClause* predict) {
    EDL_RETURN_IF_ERROR(Keyword("PREDICT"));
    std::string target;
    size_t position = 0;
    EDL_RETURN_IF_ERROR(DottedName("table.column after PREDICT", &target, &position));
    const size_t dot = target.rfind('.');
    if (dot == std::string::npos) {
      return SyntaxError(text_, position,
                         StrCat("PREDICT takes table.column (the result table and its column of "
                                "predictions), found '",
                                target, "'"));
    }
    predict->table = target.substr(0, dot);
    predict->column = target.substr(dot + 1);
    if (AtKeyword("WITH")) EDL_RETURN_IF_ERROR(ParseAttributes(&predict->attributes));
    if (!AtKeyword("USING"))
      return Expected(predict->attributes.empty() ? "WITH or USING" : "USING");
    ++i_;
    EDL_RETURN_IF_ERROR(DottedName("the trained model's name after USING", &predict->model));
    return End();
  }

  std::string_view text_;
  const std::vector<Token>& tokens_;
  size_t i_;
};

}  // namespace

std::string Value::ToString() const {
  switch (kind) {
    case Kind::kString: {
      std::string quoted = "'";
      for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
      return quoted + "'";
    }
    case Kind::kList: {
      std::string list = "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) list += ", ";
        list += items[i].ToString();
      }
      return list + "]";
    }
    default:
      return text;
  }
}

StatusOr<Statement> ParseStatement(std::string_view text) {
  EDL_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  if (tokens.size() == 1) return absl::InvalidArgumentError("syntax error: the statement is empty");
  if (!(tokens[0].kind == Token::Kind::kWord &&
        (SameWord(tokens[0].text, "SELECT") || SameWord(tokens[0].text, "WITH")))) {
    return SyntaxError(text, tokens[0].position,
                       StrCat("expected a SELECT statement, found ", Describe(tokens[0])));
  }
  // Every TRAIN or PREDICT outside parentheses and not part of a dotted name
  // may start the clause; the first one that parses to the end does.
  std::optional<Status> furthest;
  size_t furthest_position = 0;
  int depth = 0;
  for (size_t k = 1; k + 1 < tokens.size(); ++k) {
    const Token& token = tokens[k];
    if (token.kind == Token::Kind::kPunct) {
      if (token.text == "(") ++depth;
      if (token.text == ")") depth = std::max(depth - 1, 0);
      continue;
    }
    if (depth != 0 || token.kind != Token::Kind::kWord ||
        !(SameWord(token.text, "TRAIN") || SameWord(token.text, "PREDICT"))) {
      continue;
    }
    const auto is_dot = [&](size_t j) {
      return tokens[j].kind == Token::Kind::kPunct && tokens[j].text == ".";
    };
    if (is_dot(k - 1) || is_dot(k + 1)) continue;
    Statement statement;
    ClauseParser parser(text, tokens, k);
    Status status = parser.Parse(&statement);
    if (status.ok()) {
      std::string_view select = text.substr(0, token.position);
      while (!select.empty() && std::isspace(static_cast<unsigned char>(select.back()))) {
        select.remove_suffix(1);
      }
      statement.select = std::string(select);
      return statement;
    }
    if (!furthest || parser.position() >= furthest_position) {
      furthest = std::move(status);
      furthest_position = parser.position();
    }
  }
  if (furthest) return *furthest;
  return SyntaxError(text, tokens.back().position,
                     "expected TRAIN or PREDICT after the SELECT statement");
}

}  // namespace elasticdl::sql
