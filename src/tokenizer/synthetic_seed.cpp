// The embedded multilingual seed text that write_synthetic_tokenizer learns its BPE merges
// from: English prose, C++/Python/JSON code, and some French, German, Spanish, Russian,
// Greek, Chinese, Japanese and Korean, so a random model's tokenizer has realistic tokens.
namespace kimi::tok {

extern const char* const kSyntheticSeedText;

const char* const kSyntheticSeedText =
    R"SEED(The small model was trained on a mixture of text and code. It reads every sentence one
token at a time, and then it predicts the next token. When the weights are random, the
predictions are random too, but the shapes, the tokenizer and the chat format are real.
We test the engine with many short prompts and a few long ones. The server answers each
request in order; it streams the reply back to the client, one piece after another.
There is nothing magical in a tokenizer: it splits the text into words, numbers, spaces
and punctuation, and then it merges the most frequent pairs of bytes into larger tokens.
"What's the time?" she asked. "It's half past nine," he said, "and we're late again."
They'll arrive tomorrow morning; I'd rather wait here than walk in the rain.
In 2024, the team measured 1,234 requests per second at 56.7 ms median latency.
Prices rose by 3.5% in March, 4.25% in April and 0.75% in May (see Table 2, p. 13).
Call 555-0100 before 10:30 a.m. on 2025-01-15; the reference number is #A-9981.
HTTPServer, getUserName, parseJSONResponse, iPhone, McDonald, camelCase and snake_case.
THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG. the quick brown fox jumps over the lazy dog.

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    std::vector<int> values = {1, 2, 3, 4, 5};
    int total = 0;
    for (int v : values) total += v * v;
    if (argc > 1) std::printf("%s: %d\n", argv[1], total);
    return total > 100 ? 0 : 1;
}

def tokenize(text: str) -> list[int]:
    """Return the token ids of text."""
    ids = []
    for word in text.split():
        if word in vocab:
            ids.append(vocab[word])
        else:
            ids.extend(encode_bytes(word.encode("utf-8")))
    return ids

class Config:
    def __init__(self, hidden_size=2304, num_layers=27, vocab_size=163840):
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.vocab_size = vocab_size

{"model": "kimi-linear", "messages": [{"role": "user", "content": "Hello!"}], "stream": true,
 "max_tokens": 256, "temperature": 0.7, "top_p": 0.95, "stop": ["<|im_end|>"]}

SELECT name, COUNT(*) AS n FROM requests WHERE status = 200 GROUP BY name ORDER BY n DESC;
git commit -m "Fix the off-by-one error in the scheduler" && git push origin main
./build/bin/kimi-cpp score --model models/tiny --tokens 1,2,3,4 --out /tmp/logits.f32

Le petit modèle a été entraîné sur un mélange de textes et de code. Ça marche très bien,
même quand les données sont aléatoires. Où est la gare ? À côté de l'hôtel, près du café.
Die Größe des Modells ist nicht entscheidend; es kommt auf die Daten an. Schöne Grüße aus
München! Übermorgen fahren wir nach Köln, und danach über Düsseldorf zurück.
El niño pequeño comió una manzana. ¿Dónde está la biblioteca? ¡Qué día tan bonito hace hoy!
Маленькая модель обучена на смеси текста и кода. Привет, как дела? Всё хорошо, спасибо.
Το μικρό μοντέλο εκπαιδεύτηκε σε κείμενο και κώδικα. Καλημέρα, τι κάνεις σήμερα;
这个小模型是在文本和代码的混合数据上训练的。我们用很多短的提示和几个长的提示来测试引擎。
服务器按顺序回答每一个请求，并把回复一段一段地流式返回给客户端。今天天气很好，我们去公园散步吧。
中文、日本語、한국어和English混合在一起的句子也很常见。模型需要正确地处理这些文字。
この小さなモデルは、テキストとコードの混合データで訓練されました。今日はいい天気ですね。
サーバーはリクエストを順番に処理して、返事を少しずつクライアントに送ります。ありがとうございます。
이 작은 모델은 텍스트와 코드가 섞인 데이터로 학습되었습니다. 안녕하세요, 만나서 반갑습니다.
서버는 요청을 순서대로 처리하고 답변을 조금씩 스트리밍합니다. 오늘 날씨가 정말 좋네요.
Emoji and symbols: 🙂 👍 🚀 ✓ → ← ≤ ≥ ± × ÷ € £ ¥ © ® ™ § ¶ • … — – « » “ ” ‘ ’
The end of the seed text. The end of the seed text. The end of the seed text.
)SEED";

}   // namespace kimi::tok
