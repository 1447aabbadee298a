// Number ranges as grammar (see json_number_range.h).
#include "grammar/json_number_range.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"

namespace kimi::grammar {

namespace {

constexpr int kMaxDigits = 15;
constexpr double kLimit = 1e15;   // 10^kMaxDigits: open ends stop below it

std::string join_alts(const std::vector<std::string>& alts) {
    if (alts.empty()) return "";
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

std::string digit_class(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    if (lo == '0' && hi == '9') return "[0-9]";
    return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) { return n == 0 ? "" : n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}"; }

// Digit strings of equal length n, a ≤ x ≤ b as strings (leading zeros allowed).
std::string same_length(const std::string& a, const std::string& b) {
    const size_t n = a.size();
    if (n == 0) return "";
    if (a[0] == b[0]) {
        const std::string rest = same_length(a.substr(1), b.substr(1));
        return digit_class(a[0], a[0]) + (rest.empty() ? "" : " " + rest);
    }
    const std::string a_rest = a.substr(1), b_rest = b.substr(1);
    const bool a_zeros = a_rest.find_first_not_of('0') == std::string::npos;
    const bool b_nines = b_rest.find_first_not_of('9') == std::string::npos;
    std::vector<std::string> alts;
    char mid_lo = char(a[0] + 1), mid_hi = char(b[0] - 1);
    if (a_zeros)
        mid_lo = a[0];
    else
        alts.push_back(digit_class(a[0], a[0]) + " " + same_length(a_rest, std::string(n - 1, '9')));
    if (b_nines) mid_hi = b[0];
    if (mid_lo <= mid_hi) {
        const std::string tail = any_digits(n - 1);
        alts.push_back(digit_class(mid_lo, mid_hi) + (tail.empty() ? "" : " " + tail));
    }
    if (!b_nines) alts.push_back(digit_class(b[0], b[0]) + " " + same_length(std::string(n - 1, '0'), b_rest));
    return join_alts(alts);
}

int64_t pow10(size_t n) {
    int64_t p = 1;
    for (size_t i = 0; i < n; ++i) p *= 10;
    return p;
}

// Decimal integers (no sign, no leading zeros) in [a, b]; b < 0: up to kMaxDigits digits. "" if empty.
std::string natural_range(int64_t a, int64_t b) {
    if (b < 0) b = pow10(kMaxDigits) - 1;
    if (a > b) return "";
    std::vector<std::string> alts;
    for (size_t d = 1; d <= size_t(kMaxDigits); ++d) {
        const int64_t lo = std::max<int64_t>(a, d == 1 ? 0 : pow10(d - 1)), hi = std::min<int64_t>(b, pow10(d) - 1);
        if (lo > hi) continue;
        alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
    }
    return join_alts(alts);
}

}   // namespace

std::string number_range_gbnf(const NumberBounds& b, bool integer) {
    const int64_t open_hi = pow10(kMaxDigits) - 1;
    if (b.lo && *b.lo >= kLimit) throw Error("'minimum' is too large for a grammar (at most 1e15)");
    if (b.hi && *b.hi <= -kLimit) throw Error("'maximum' is too small for a grammar (at least -1e15)");
    // the integers inside the bounds: [int_lo, int_hi]
    int64_t int_lo = -open_hi, int_hi = open_hi;
    if (b.lo && *b.lo > -kLimit) {
        const double c = std::ceil(*b.lo);
        int_lo = int64_t(c) + (b.lo_exclusive && c == *b.lo ? 1 : 0);
    }
    if (b.hi && *b.hi < kLimit) {
        const double f = std::floor(*b.hi);
        int_hi = int64_t(f) + (b.hi_exclusive && f == *b.hi ? -1 : 0);
    }
    std::vector<std::string> alts;
    // integers: −x for x in [max(1, −int_hi), −int_lo]; x in [max(0, int_lo), int_hi]
    if (int_lo < 0) {
        const std::string neg = natural_range(std::max<int64_t>(1, -int_hi), -int_lo);
        if (!neg.empty()) alts.push_back("\"-\" " + neg);
    }
    if (int_hi >= 0) {
        const std::string pos = natural_range(std::max<int64_t>(0, int_lo), int_hi);
        if (!pos.empty()) alts.push_back(pos);
    }
    if (!integer) {
        // i.f ≥ 0: int_lo ≤ i, i + 1 ≤ hi; −(i.f): i ≥ −int_hi, −(i + 1) ≥ lo
        const std::string frac = "\".\" [0-9]{1,6}";
        const int64_t fhi = b.hi && *b.hi < kLimit ? int64_t(std::floor(*b.hi)) - 1 : open_hi;
        if (fhi >= 0) {
            const std::string pos = natural_range(std::max<int64_t>(0, int_lo), fhi);
            if (!pos.empty()) alts.push_back(pos + " " + frac);
        }
        const int64_t nhi = b.lo && *b.lo > -kLimit ? -int64_t(std::ceil(*b.lo)) - 1 : open_hi;
        if (nhi >= 0) {
            const std::string neg = natural_range(std::max<int64_t>(0, -int_hi), nhi);
            if (!neg.empty()) alts.push_back("\"-\" " + neg + " " + frac);
        }
    }
    if (alts.empty()) throw Error(std::string("'minimum' / 'maximum' leave no ") + (integer ? "integer" : "number"));
    return join_alts(alts);
}

}   // namespace kimi::grammar
