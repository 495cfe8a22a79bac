// The tuning bundle; see tuning_share.h.
#include "algorithms/cost/tuning_share.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "algorithms/planner/plan_store.h"
#include "base/error.h"

namespace grove::plan {

namespace {

constexpr const char* kHeader = "grove-tuning";
constexpr int kVersion = 1;
constexpr uint64_t kMaxPlans = 4096;
constexpr uint64_t kMaxRows = 64;
/// Larger bundles are refused when encoded (the bootstrap carries up to 1 GiB).
constexpr size_t kMaxBundleBytes = size_t{256} << 20;
constexpr const char* kNoFingerprint = "-";
constexpr const char* kLastRow = "max";

/// `w` as a count of at most `most`; nullopt if it is not one.
std::optional<uint64_t> countOf(const std::optional<std::string>& w, uint64_t most) {
  if (!w || w->empty() || w->size() > 20 || w->find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  try {
    const unsigned long long v = std::stoull(*w);
    if (v > most) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// Reads a bundle's words, and texts of a stated length.
class Reader {
 public:
  explicit Reader(const std::string& text) : text_(text) {}

  /// The next word; nullopt at the end.
  std::optional<std::string> word() {
    while (pos_ < text_.size() && isSpace(text_[pos_])) ++pos_;
    if (pos_ >= text_.size()) return std::nullopt;
    const size_t start = pos_;
    while (pos_ < text_.size() && !isSpace(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  /// The next word as a count of at most `most`; nullopt if it is not one.
  std::optional<uint64_t> count(uint64_t most) { return countOf(word(), most); }
  /// The `bytes` bytes after the one space that follows the last word.
  std::optional<std::string> text(uint64_t bytes) {
    if (pos_ >= text_.size() || text_[pos_] != ' ') return std::nullopt;
    ++pos_;
    if (bytes > text_.size() - pos_) return std::nullopt;
    std::string out = text_.substr(pos_, bytes);
    pos_ += bytes;
    return out;
  }

 private:
  static bool isSpace(char c) { return c == ' ' || c == '\n'; }
  const std::string& text_;
  size_t pos_ = 0;
};

bool fail(std::string* why, const std::string& text) {
  *why = text;
  return false;
}

}  // namespace

std::string encodeTuning(TopoPlans& plans, const Selector& sel) {
  const std::string fingerprint = plans.sharingKey();
  const std::vector<TopoPlans::NamedPlan> made = plans.exportPlans();
  std::string out = std::string(kHeader) + " " + std::to_string(kVersion) + " " +
                    (fingerprint.empty() ? kNoFingerprint : fingerprint) + " " +
                    std::to_string(made.size()) + "\n";
  if (made.size() > kMaxPlans)
    throwInvalidArgument("tuning bundle: " + std::to_string(made.size()) + " plans (at most " +
                         std::to_string(kMaxPlans) + ")");
  for (const auto& [item, text] : made) {
    if (text.size() > PlanStore::kMaxFileBytes)
      throwInvalidArgument("tuning bundle: plan " + item + " takes " + std::to_string(text.size()) +
                           " bytes (at most " + std::to_string(PlanStore::kMaxFileBytes) + ")");
    out += item + " " + std::to_string(text.size()) + " " + text + "\n";
  }
  std::vector<Coll> tuned;
  for (int c = 0; c < kNumColls; ++c)
    if (!sel.sizeTable(static_cast<Coll>(c)).empty()) tuned.push_back(static_cast<Coll>(c));
  out += "tables " + std::to_string(tuned.size()) + "\n";
  for (Coll coll : tuned) {
    const std::vector<SizeRule>& rules = sel.sizeTable(coll);
    out += std::string(collName(coll)) + " " + std::to_string(rules.size());
    for (const SizeRule& r : rules)
      out += " " + (r.maxBytes == UINT64_MAX ? std::string(kLastRow) : std::to_string(r.maxBytes)) +
             " " + algoName(r.algo);
    out += "\n";
  }
  if (out.size() > kMaxBundleBytes)
    throwInvalidArgument("tuning bundle of " + std::to_string(out.size()) + " bytes (at most " +
                         std::to_string(kMaxBundleBytes) + ")");
  return out;
}

bool applyTuning(const std::string& bundle, TopoPlans& plans, Selector& sel, std::string* why) {
  Reader in(bundle);
  if (in.word() != std::optional<std::string>(kHeader))
    return fail(why, "not a tuning bundle (no '" + std::string(kHeader) + "' header)");
  if (in.count(1000) != std::optional<uint64_t>(kVersion))
    return fail(why, "a tuning bundle of another version");
  const std::optional<std::string> fingerprint = in.word();
  const std::optional<uint64_t> nplans = in.count(kMaxPlans);
  if (!fingerprint || !nplans) return fail(why, "a malformed tuning bundle header");
  std::vector<TopoPlans::NamedPlan> made;
  for (uint64_t i = 0; i < *nplans; ++i) {
    const std::optional<std::string> item = in.word();
    const std::optional<uint64_t> bytes = in.count(PlanStore::kMaxFileBytes);
    const std::optional<std::string> text = bytes ? in.text(*bytes) : std::nullopt;
    if (!item || !text)
      return fail(why, "plan " + std::to_string(i) + " of the bundle is cut short");
    made.emplace_back(*item, *text);
  }
  // The tables are read (and checked on a copy of the selector) before any
  // plan is taken: a bundle either fits or changes nothing of the choice.
  Selector tuned = sel;
  const std::optional<std::string> tablesWord = in.word();
  const std::optional<uint64_t> ntables = in.count(kNumColls);
  if (tablesWord != std::optional<std::string>("tables") || !ntables)
    return fail(why, "the bundle's size tables are missing");
  for (uint64_t t = 0; t < *ntables; ++t) {
    const std::optional<std::string> name = in.word();
    const std::optional<Coll> coll = name ? parseColl(*name) : std::nullopt;
    const std::optional<uint64_t> nrows = in.count(kMaxRows);
    if (!coll || !nrows)
      return fail(why, "size table " + std::to_string(t) + " names no collective");
    std::vector<SizeRule> rules;
    for (uint64_t r = 0; r < *nrows; ++r) {
      const std::optional<std::string> max = in.word();
      SizeRule rule;
      if (max == std::optional<std::string>(kLastRow)) {
        rule.maxBytes = UINT64_MAX;
      } else {
        const std::optional<uint64_t> v = countOf(max, UINT64_MAX - 1);
        if (!v) return fail(why, "a size table row of " + *name + " has no size");
        rule.maxBytes = *v;
      }
      const std::optional<std::string> algoWord = in.word();
      const std::optional<Algo> algo = algoWord ? parseAlgo(*algoWord) : std::nullopt;
      if (!algo) return fail(why, "a size table row of " + *name + " names no algorithm");
      rule.algo = *algo;
      rules.push_back(rule);
    }
    try {
      tuned.setSizeTable(*coll, std::move(rules));
    } catch (const Error& e) {
      return fail(why, std::string("size table of ") + *name + ": " + e.what());
    }
  }
  if (in.word()) return fail(why, "the bundle goes on after its size tables");
  if (!plans.importPlans(made, *fingerprint == kNoFingerprint ? "" : *fingerprint, why))
    return false;
  sel = std::move(tuned);
  return true;
}

}  // namespace grove::plan
