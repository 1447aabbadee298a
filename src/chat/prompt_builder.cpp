// PromptBuilder (see prompt_builder.h).
#include "chat/prompt_builder.h"

#include "core/error.h"

namespace kimi::chat {

void PromptBuilder::special(std::string_view marker) {
    const auto id = tok_.special_id(marker);
    if (!id) throw Error("chat format: the tokenizer has no special token " + std::string(marker));
    flush();
    out_.text += marker;
    out_.ids.push_back(*id);
}

void PromptBuilder::flush() {
    if (pending_.empty()) return;
    out_.text += pending_;
    tok_.encode_append(pending_, allow_special_, out_.ids);
    pending_.clear();
}

tok::ChatPrompt PromptBuilder::finish() {
    flush();
    return std::move(out_);
}

}   // namespace kimi::chat
