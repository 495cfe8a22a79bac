#include "topology/xml.h"

#include <cctype>
#include <charconv>

#include "base/error.h"

namespace grove::topo::xml {

const std::string* Element::attr(const std::string& key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : s_(text), source_(source) {}

  Element parseDocument() {
    skipMisc();
    if (pos_ >= s_.size()) fail("the document has no root element");
    Element root = parseElement(0);
    skipMisc();
    if (pos_ < s_.size()) fail("unexpected content after the root element <" + root.name + ">");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what, int line = 0) {
    throwInvalidArgument(source_ + ":" + std::to_string(line ? line : line_) + ": " + what);
  }

  void advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i)
      if (s_[pos_++] == '\n') ++line_;
  }

  bool startsWith(const char* p) const {
    return s_.compare(pos_, std::char_traits<char>::length(p), p) == 0;
  }

  void skipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) advance(1);
  }

  void skipUntil(const char* end, const char* what) {
    size_t at = s_.find(end, pos_);
    if (at == std::string::npos) fail(std::string("unterminated ") + what);
    advance(at - pos_ + std::char_traits<char>::length(end));
  }

  // Whitespace, comments, declarations and processing instructions.
  void skipMisc() {
    while (true) {
      skipSpace();
      if (startsWith("<?")) {
        skipUntil("?>", "<? ... ?> declaration");
      } else if (startsWith("<!--")) {
        skipUntil("-->", "comment");
      } else if (startsWith("<!")) {
        skipUntil(">", "<! ... > declaration");
      } else {
        return;
      }
    }
  }

  std::string parseName() {
    size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
            s_[pos_] == '-' || s_[pos_] == '.' || s_[pos_] == ':'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }

  std::string decode(const std::string& raw, int line) {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string::npos) fail("'&' without ';' in text or attribute", line);
      std::string ent = raw.substr(i + 1, semi - i - 1);
      if (ent == "amp")
        out += '&';
      else if (ent == "lt")
        out += '<';
      else if (ent == "gt")
        out += '>';
      else if (ent == "quot")
        out += '"';
      else if (ent == "apos")
        out += '\'';
      else if (!ent.empty() && ent[0] == '#') {
        unsigned cp = 0;
        bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
        const char* b = ent.data() + (hex ? 2 : 1);
        auto [end, ec] = std::from_chars(b, ent.data() + ent.size(), cp, hex ? 16 : 10);
        if (ec != std::errc() || end != ent.data() + ent.size() || cp > 0x7f)
          fail("unsupported character reference &" + ent + ";", line);
        out += static_cast<char>(cp);
      } else {
        fail("unknown entity &" + ent + ";", line);
      }
      i = semi;
    }
    return out;
  }

  void parseAttrs(Element& e) {
    while (true) {
      skipSpace();
      if (pos_ >= s_.size()) fail("unterminated start tag <" + e.name + ">", e.line);
      if (s_[pos_] == '>' || startsWith("/>")) return;
      int line = line_;
      std::string key = parseName();
      if (key.empty())
        fail("bad character '" + std::string(1, s_[pos_]) + "' in element <" + e.name + ">");
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '=')
        fail("attribute '" + key + "' of element <" + e.name + "> has no value");
      advance(1);
      skipSpace();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\''))
        fail("attribute '" + key + "' of element <" + e.name + "> is not quoted");
      char q = s_[pos_];
      size_t end = s_.find(q, pos_ + 1);
      if (end == std::string::npos)
        fail("unterminated value of attribute '" + key + "' in <" + e.name + ">");
      std::string raw = s_.substr(pos_ + 1, end - pos_ - 1);
      advance(end - pos_ + 1);
      if (e.attr(key)) fail("duplicate attribute '" + key + "' in element <" + e.name + ">", line);
      e.attrs.emplace_back(key, decode(raw, line));
    }
  }

  Element parseElement(int depth) {
    if (depth > 64) fail("elements nested too deep");
    if (pos_ >= s_.size() || s_[pos_] != '<') fail("expected an element");
    Element e;
    e.line = line_;
    advance(1);
    e.name = parseName();
    if (e.name.empty()) fail("expected an element name after '<'");
    parseAttrs(e);
    if (startsWith("/>")) {
      advance(2);
      return e;
    }
    advance(1);  // '>'
    while (true) {
      size_t lt = s_.find('<', pos_);
      if (lt == std::string::npos)
        fail("element <" + e.name + "> opened here is never closed", e.line);
      std::string text = s_.substr(pos_, lt - pos_);
      int textLine = line_;
      advance(lt - pos_);
      size_t a = text.find_first_not_of(" \t\r\n"), b = text.find_last_not_of(" \t\r\n");
      if (a != std::string::npos) e.text += decode(text.substr(a, b - a + 1), textLine);
      if (startsWith("<!--")) {
        skipUntil("-->", "comment");
      } else if (startsWith("</")) {
        advance(2);
        std::string closing = parseName();
        skipSpace();
        if (closing != e.name)
          fail("closing tag </" + closing + "> does not match <" + e.name + "> opened on line " +
               std::to_string(e.line));
        if (pos_ >= s_.size() || s_[pos_] != '>') fail("bad closing tag </" + closing);
        advance(1);
        return e;
      } else if (startsWith("<?")) {
        skipUntil("?>", "processing instruction");
      } else {
        e.children.push_back(parseElement(depth + 1));
      }
    }
  }

  const std::string& s_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

Element parse(const std::string& text, const std::string& source) {
  return Parser(text, source).parseDocument();
}

}  // namespace grove::topo::xml
