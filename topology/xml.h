// A small XML reader, enough for NCCL topology dumps (no dependency).
//
// How it works: one pass over the text builds a tree of Elements (name,
// attributes in file order, children, line). It understands the XML
// declaration, comments, self-closing tags, quoted attributes with the five
// predefined entities and numeric character references; text between tags is
// kept (trimmed) but NCCL files have none. It does not do DTDs, namespaces
// or CDATA. Mismatched or unclosed tags raise grove::Error naming the source,
// the line and the element.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace grove::topo::xml {

/// One element of the document.
struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  ///< in file order
  std::vector<Element> children;
  std::string text;  ///< trimmed text content
  int line = 0;      ///< 1-based line of the start tag

  /// Attribute value, or null when absent.
  const std::string* attr(const std::string& key) const;
};

/// Parses `text`; returns the root element. Throws grove::Error(InvalidArgument)
/// "<source>:<line>: <what>" on malformed input.
Element parse(const std::string& text, const std::string& source);

}  // namespace grove::topo::xml
