// TextStream implementation (see text_stream.h).
#include "runtime/text_stream.h"

#include <algorithm>

namespace kimi {

namespace {
bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
}   // namespace

TextStream::TextStream(const tok::Tokenizer& tok, const std::vector<std::string>& stops, bool skip_special,
                       bool include_stop, const std::vector<int32_t>& keep_special)
    : tok_(&tok),
      stops_(stops),
      dec_(tok),
      skip_special_(skip_special),
      keep_special_(keep_special),
      include_stop_(include_stop) {
    for (const auto& s : stops) hold_ = std::max(hold_, s.size() - 1);
    pending_.reserve(hold_ + 64);
}

bool TextStream::push(int32_t id, std::string& out) {
    if (done_) return true;
    if (skip_special_ && tok_->is_special(id) &&
        std::find(keep_special_.begin(), keep_special_.end(), id) == keep_special_.end())
        return false;
    const size_t before = pending_.size();
    dec_.push(id, pending_);
    if (!stops_.empty() && pending_.size() > before) {
        // A new occurrence must end inside the new bytes: it starts at most (len − 1) earlier.
        size_t best = std::string::npos;
        for (size_t i = 0; i < stops_.size(); ++i) {
            const std::string& s = stops_[i];
            const size_t from = before >= s.size() - 1 ? before - (s.size() - 1) : 0;
            const size_t at = pending_.find(s, from);
            if (at < best) {
                best = at;
                stop_index_ = int32_t(i);
            }
        }
        if (best != std::string::npos) {
            out.append(pending_, 0, include_stop_ ? best + stops_[size_t(stop_index_)].size() : best);
            pending_.clear();
            done_ = true;
            return true;
        }
    }
    // Emit all but the held-back tail, never cutting a character in two.
    if (pending_.size() <= hold_) return false;
    size_t cut = pending_.size() - hold_;
    while (cut > 0 && cut < pending_.size() && is_continuation(pending_[cut])) --cut;
    out.append(pending_, 0, cut);
    pending_.erase(0, cut);
    return false;
}

void TextStream::finish(std::string& out) {
    if (done_) return;
    dec_.flush(pending_);
    out.append(pending_);
    pending_.clear();
    done_ = true;
}

}   // namespace kimi
