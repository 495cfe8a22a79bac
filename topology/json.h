// A small JSON reader and writer for topology files (no dependency).
//
// How it works: parse() is a recursive-descent parser over the whole text
// that keeps the line of every value, so the topology loader can say
// "file.json:12: node 'gpu3': ..." about any field. Objects keep their keys
// in file order (a vector of pairs; lookups are linear, objects are small).
// Numbers are doubles. write() prints with two-space indentation; arrays of
// scalars and small objects stay on one line so dumps remain readable.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace grove::topo::json {

/// One JSON value with the line it started on.
struct Value {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;                                   ///< kString
  std::vector<Value> items;                           ///< kArray
  std::vector<std::pair<std::string, Value>> fields;  ///< kObject, in order
  int line = 0;                                       ///< 1-based line where it starts

  // Defined in json.cc, where Value is complete: a member vector of pairs
  // holding Value must not instantiate its destructor inside this class
  // (clang with libstdc++ refuses the incomplete pair).
  Value();
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;
  ~Value();

  bool isObject() const { return type == Type::kObject; }
  bool isArray() const { return type == Type::kArray; }
  bool isString() const { return type == Type::kString; }
  bool isNumber() const { return type == Type::kNumber; }
  /// Field `key` of an object, or null when absent / not an object.
  const Value* get(const std::string& key) const;

  /// Builders.
  static Value makeString(std::string s);
  static Value makeNumber(double d);
  static Value makeBool(bool b);
  static Value makeArray();
  static Value makeObject();
  /// Appends (arrays) or sets (objects) and returns *this.
  Value& push(Value v);
  Value& set(const std::string& key, Value v);
};

/// Parses `text`; throws grove::Error(InvalidArgument) "<source>:<line>: <what>" on bad input.
Value parse(const std::string& text, const std::string& source);
/// Serialises `v` (pretty when `pretty`).
std::string write(const Value& v, bool pretty = true);
/// Shortest text that reads back as exactly `d`.
std::string formatNumber(double d);

}  // namespace grove::topo::json
