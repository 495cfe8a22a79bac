#include "topology/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/json_text.h"

namespace grove::topo::json {

Value::Value() = default;
Value::Value(const Value&) = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) = default;
Value& Value::operator=(Value&&) noexcept = default;
Value::~Value() = default;

const Value* Value::get(const std::string& key) const {
  if (type != Type::kObject) return nullptr;
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

Value Value::makeString(std::string s) {
  Value v;
  v.type = Type::kString;
  v.text = std::move(s);
  return v;
}
Value Value::makeNumber(double d) {
  Value v;
  v.type = Type::kNumber;
  v.number = d;
  return v;
}
Value Value::makeBool(bool b) {
  Value v;
  v.type = Type::kBool;
  v.boolean = b;
  return v;
}
Value Value::makeArray() {
  Value v;
  v.type = Type::kArray;
  return v;
}
Value Value::makeObject() {
  Value v;
  v.type = Type::kObject;
  return v;
}
Value& Value::push(Value v) {
  items.push_back(std::move(v));
  return *this;
}
Value& Value::set(const std::string& key, Value v) {
  for (auto& [k, old] : fields)
    if (k == key) {
      old = std::move(v);
      return *this;
    }
  fields.emplace_back(key, std::move(v));
  return *this;
}

namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : s_(text), source_(source) {}

  Value parseDocument() {
    Value v = parseValue(0);
    skipSpace();
    if (pos_ < s_.size()) fail("unexpected text after the end of the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throwInvalidArgument(source_ + ":" + std::to_string(line_) + ": " + what);
  }

  void skipSpace() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '\n') {
        ++line_;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        break;
      }
      ++pos_;
    }
  }

  bool consume(char c) {
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, const std::string& where) {
    if (!consume(c)) {
      std::string got = pos_ < s_.size() ? std::string("'") + s_[pos_] + "'" : "end of file";
      fail(std::string("expected '") + c + "' " + where + ", found " + got);
    }
  }

  Value parseValue(int depth) {
    if (depth > 64) fail("nesting too deep");
    skipSpace();
    if (pos_ >= s_.size()) fail("unexpected end of file, expected a value");
    Value v;
    v.line = line_;
    char c = s_[pos_];
    if (c == '{') {
      parseObject(v, depth);
    } else if (c == '[') {
      parseArray(v, depth);
    } else if (c == '"') {
      v.type = Value::Type::kString;
      v.text = parseString();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = Value::Type::kNumber;
      v.number = parseNumber();
    } else if (s_.compare(pos_, 4, "true") == 0) {
      v.type = Value::Type::kBool, v.boolean = true, pos_ += 4;
    } else if (s_.compare(pos_, 5, "false") == 0) {
      v.type = Value::Type::kBool, pos_ += 5;
    } else if (s_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  void parseObject(Value& v, int depth) {
    v.type = Value::Type::kObject;
    ++pos_;
    if (consume('}')) return;
    do {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a quoted key in object");
      std::string key = parseString();
      if (v.get(key)) fail("duplicate key \"" + key + "\"");
      expect(':', "after key \"" + key + "\"");
      v.fields.emplace_back(std::move(key), parseValue(depth + 1));
    } while (consume(','));
    expect('}', "to close the object");
  }

  void parseArray(Value& v, int depth) {
    v.type = Value::Type::kArray;
    ++pos_;
    if (consume(']')) return;
    do {
      v.items.push_back(parseValue(depth + 1));
    } while (consume(','));
    expect(']', "to close the array");
  }

  double parseNumber() {
    size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size() &&
           (isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' || s_[pos_] == 'e' ||
            s_[pos_] == 'E' || s_[pos_] == '+' || s_[pos_] == '-'))
      ++pos_;
    double d = 0;
    auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (ec != std::errc() || end != s_.data() + pos_)
      fail("bad number '" + s_.substr(start, pos_ - start) + "'");
    return d;
  }

  std::string parseString() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (c == '\n') fail("newline inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': out += parseUnicode(); break;
        case '"':
        case '\\':
        case '/': out += e; break;
        default: fail(std::string("bad escape '\\") + e + "' in string");
      }
    }
  }

  std::string parseUnicode() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    unsigned cp = 0;
    auto [end, ec] = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, cp, 16);
    if (ec != std::errc() || end != s_.data() + pos_ + 4) fail("bad \\u escape");
    pos_ += 4;
    std::string out;  // UTF-8 (surrogate pairs are not combined: topology files are ASCII)
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
  }

  const std::string& s_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
};

bool isFlat(const Value& v) {
  if (!v.isArray() && !v.isObject()) return true;
  size_t n = v.isArray() ? v.items.size() : v.fields.size();
  for (size_t i = 0; i < n; ++i) {
    const Value& c = v.isArray() ? v.items[i] : v.fields[i].second;
    if (c.isArray() || c.isObject()) return false;
  }
  return true;
}

void writeValue(std::string& out, const Value& v, bool pretty, int indent) {
  std::string pad = pretty ? "\n" + std::string(2 * (indent + 1), ' ') : "";
  std::string close = pretty ? "\n" + std::string(2 * indent, ' ') : "";
  bool oneLine = !pretty || isFlat(v);
  switch (v.type) {
    case Value::Type::kNull: out += "null"; return;
    case Value::Type::kBool: out += v.boolean ? "true" : "false"; return;
    case Value::Type::kNumber: out += formatNumber(v.number); return;
    case Value::Type::kString: appendJsonString(out, v.text); return;
    case Value::Type::kArray:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        out += i ? (oneLine && pretty ? ", " : ",") : "";
        if (!oneLine) out += pad;
        writeValue(out, v.items[i], pretty, indent + 1);
      }
      if (!oneLine && !v.items.empty()) out += close;
      out += ']';
      return;
    case Value::Type::kObject:
      out += '{';
      for (size_t i = 0; i < v.fields.size(); ++i) {
        out += i ? (oneLine && pretty ? ", " : ",") : "";
        if (!oneLine) out += pad;
        appendJsonString(out, v.fields[i].first);
        out += pretty ? ": " : ":";
        writeValue(out, v.fields[i].second, pretty, indent + 1);
      }
      if (!oneLine && !v.fields.empty()) out += close;
      out += '}';
      return;
  }
}

}  // namespace

Value parse(const std::string& text, const std::string& source) {
  return Parser(text, source).parseDocument();
}

std::string write(const Value& v, bool pretty) {
  std::string out;
  writeValue(out, v, pretty, 0);
  if (pretty) out += '\n';
  return out;
}

std::string formatNumber(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(d);
}

}  // namespace grove::topo::json
