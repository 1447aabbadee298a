// PromptBuilder: a prompt as text runs and markers. Markers are emitted as their special ids;
// each text run between two markers is tokenized as one segment, so the ids equal
// tokenize(text) whenever the content spells no special token.
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace kimi::chat {

class PromptBuilder {
public:
    PromptBuilder(const tok::Tokenizer& t, bool allow_special_in_content)
        : tok_(t), allow_special_(allow_special_in_content) {}
    void text(std::string_view s) { pending_ += s; }
    void special(std::string_view marker);   // throws if the tokenizer lacks it
    tok::ChatPrompt finish();

private:
    void flush();
    const tok::Tokenizer& tok_;
    bool allow_special_;
    std::string pending_;
    tok::ChatPrompt out_;
};

}   // namespace kimi::chat
