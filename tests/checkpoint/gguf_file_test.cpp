// GGUF container reader (checkpoint/gguf_file.h): valid files written byte by byte here (every
// metadata type, F32/F16/BF16/Q8_0/Q4_K tensors, alignment 32 and 64, v2 and v3), one corrupt
// file per validation rule (each a kimi::Error naming the file and the key or tensor, never a
// crash: this suite also runs under ASan + UBSan), the typed getters, split naming and split
// models written to a temporary folder.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/gguf_file.h"
#include "core/rng.h"
#include "test_models.h"

namespace kimi {
namespace {

// Writes a GGUF file image: metadata kvs, tensor infos (offsets placed automatically, each
// aligned, or given), the data section.
class GgufBuilder {
public:
    uint32_t version = 3;
    uint64_t alignment = 32;   // how tensor data is placed (set general.alignment to match)

    template <typename T>
    static void put(std::string& s, T v) {
        s.append(reinterpret_cast<const char*>(&v), sizeof(T));
    }
    static void put_str(std::string& s, const std::string& v) {
        put<uint64_t>(s, v.size());
        s += v;
    }

    template <typename T>
    GgufBuilder& kv(const std::string& key, GgufType t, T v) {
        head(key, t);
        put<T>(kvs_, v);
        return *this;
    }
    GgufBuilder& kv_str(const std::string& key, const std::string& v) {
        head(key, GgufType::kString);
        put_str(kvs_, v);
        return *this;
    }
    template <typename T>
    GgufBuilder& kv_array(const std::string& key, GgufType elem, const std::vector<T>& v) {
        head(key, GgufType::kArray);
        put<uint32_t>(kvs_, uint32_t(elem));
        put<uint64_t>(kvs_, v.size());
        for (const T& x : v) put<T>(kvs_, x);
        return *this;
    }
    GgufBuilder& kv_str_array(const std::string& key, const std::vector<std::string>& v) {
        head(key, GgufType::kArray);
        put<uint32_t>(kvs_, uint32_t(GgufType::kString));
        put<uint64_t>(kvs_, v.size());
        for (const auto& x : v) put_str(kvs_, x);
        return *this;
    }
    GgufBuilder& kv_raw(const std::string& raw) {   // any bytes as one kv record
        kvs_ += raw;
        ++n_kv_;
        return *this;
    }

    // A tensor of `nbytes` bytes (pattern seeded by its index), placed at the next aligned offset.
    uint64_t tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type, uint64_t nbytes) {
        const uint64_t off = (data_.size() + alignment - 1) / alignment * alignment;
        data_.resize(size_t(off), '\0');
        for (uint64_t i = 0; i < nbytes; ++i) data_ += char((n_tensors_ * 31 + i) & 0xff);
        tensor_at(name, ne, type, off);
        return off;
    }
    GgufBuilder& tensor_at(const std::string& name, const std::vector<int64_t>& ne, uint32_t type, uint64_t offset) {
        put_str(infos_, name);
        put<uint32_t>(infos_, uint32_t(ne.size()));
        for (int64_t n : ne) put<int64_t>(infos_, n);
        put<uint32_t>(infos_, type);
        put<uint64_t>(infos_, offset);
        ++n_tensors_;
        return *this;
    }
    GgufBuilder& data(uint64_t bytes) {   // raw bytes appended to the data section
        data_.append(size_t(bytes), '\x5a');
        return *this;
    }
    GgufBuilder& info_raw(const std::string& raw) {   // any bytes as one tensor info
        infos_ += raw;
        ++n_tensors_;
        return *this;
    }

    std::string bytes() const {
        std::string s = "GGUF";
        put<uint32_t>(s, version);
        put<uint64_t>(s, n_tensors_);
        put<uint64_t>(s, n_kv_);
        s += kvs_ + infos_;
        if (n_tensors_) s.resize((s.size() + alignment - 1) / alignment * alignment, '\0');
        return s + data_;
    }

private:
    void head(const std::string& key, GgufType t) {
        put_str(kvs_, key);
        put<uint32_t>(kvs_, uint32_t(t));
        ++n_kv_;
    }
    std::string kvs_, infos_, data_;
    uint64_t n_kv_ = 0, n_tensors_ = 0;
};

constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ8_1 = 9, kQ4_K = 12, kBF16 = 30;

GgufContents parse(const std::string& f, const std::string& path = "x.gguf") {
    return parse_gguf(reinterpret_cast<const unsigned char*>(f.data()), f.size(), path);
}

void expect_error(const std::string& f, const std::string& needle) {
    try {
        parse(f);
        ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).rfind("x.gguf: ", 0), 0u) << e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
}

template <typename F>
void expect_throws(F&& f, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

// A small valid file: two kvs, an F32 and a Q8_0 tensor (the data ends the file).
std::string small_file() {
    GgufBuilder b;
    b.kv_str("general.architecture", "kimi").kv<uint32_t>("n", GgufType::kU32, 7);
    b.tensor("w", {4, 2}, kF32, 32);
    b.tensor("q", {32}, kQ8_0, 34);
    return b.bytes();
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& bytes) {
    const std::string p = dir + "/" + name;
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return p;
}

TEST(Gguf, ParsesEveryMetadataTypeAndTensors) {
    GgufBuilder b;
    b.kv<uint8_t>("u8", GgufType::kU8, 200)
        .kv<int8_t>("i8", GgufType::kI8, -5)
        .kv<uint16_t>("u16", GgufType::kU16, 60000)
        .kv<int16_t>("i16", GgufType::kI16, -30000)
        .kv<uint32_t>("u32", GgufType::kU32, 4000000000u)
        .kv<int32_t>("i32", GgufType::kI32, -2000000000)
        .kv<float>("f32", GgufType::kF32, 1.5f)
        .kv<uint8_t>("bool", GgufType::kBool, 1)
        .kv_str("str", "héllo")
        .kv<uint64_t>("u64", GgufType::kU64, uint64_t(1) << 40)
        .kv<int64_t>("i64", GgufType::kI64, -(int64_t(1) << 40))
        .kv<double>("f64", GgufType::kF64, 0.25)
        .kv_array<int32_t>("arr.i32", GgufType::kI32, {1, -2, 3})
        .kv_array<float>("arr.f32", GgufType::kF32, {0.5f, 2.0f})
        .kv_array<uint8_t>("arr.empty", GgufType::kU8, {})
        .kv_str_array("arr.str", {"a", "", "ccc"});
    const uint64_t o_f32 = b.tensor("f32.weight", {3, 2}, kF32, 24);
    const uint64_t o_f16 = b.tensor("f16.weight", {5}, kF16, 10);
    const uint64_t o_bf16 = b.tensor("bf16.weight", {2, 3, 4}, kBF16, 48);
    const uint64_t o_q8 = b.tensor("q8.weight", {64, 3}, kQ8_0, 2 * 3 * 34);
    const uint64_t o_q4k = b.tensor("q4k.weight", {256, 2, 1, 2}, kQ4_K, 4 * 144);
    const std::string f = b.bytes();
    const GgufContents c = parse(f);
    const auto* base = reinterpret_cast<const unsigned char*>(f.data());

    EXPECT_EQ(c.version, 3u);
    EXPECT_EQ(c.alignment, 32u);
    EXPECT_EQ(c.data_offset % 32, 0u);
    ASSERT_EQ(c.metadata.size(), 16u);
    const auto& m = c.metadata;
    EXPECT_EQ(m.at("u8").u, 200u);
    EXPECT_EQ(m.at("i8").i, -5);
    EXPECT_EQ(m.at("u16").u, 60000u);
    EXPECT_EQ(m.at("i16").i, -30000);
    EXPECT_EQ(m.at("u32").u, 4000000000u);
    EXPECT_EQ(m.at("i32").i, -2000000000);
    EXPECT_EQ(m.at("f32").f, 1.5);
    EXPECT_EQ(m.at("bool").type, GgufType::kBool);
    EXPECT_EQ(m.at("bool").u, 1u);
    EXPECT_EQ(m.at("str").s, "héllo");
    EXPECT_EQ(m.at("u64").u, uint64_t(1) << 40);
    EXPECT_EQ(m.at("i64").i, -(int64_t(1) << 40));
    EXPECT_EQ(m.at("f64").f, 0.25);
    EXPECT_EQ(m.at("arr.i32").type, GgufType::kArray);
    EXPECT_EQ(m.at("arr.i32").elem, GgufType::kI32);
    EXPECT_EQ(m.at("arr.i32").count, 3u);
    int32_t second;
    std::memcpy(&second, m.at("arr.i32").raw + 4, 4);
    EXPECT_EQ(second, -2);
    EXPECT_EQ(m.at("arr.empty").count, 0u);
    EXPECT_EQ(m.at("arr.str").strings, (std::vector<std::string>{"a", "", "ccc"}));

    ASSERT_EQ(c.tensors.size(), 5u);
    const struct {
        const char* name;
        uint64_t offset, nbytes;
        DType dtype;
        std::vector<int64_t> shape;
    } want[] = {
        {"f32.weight", o_f32, 24, DType::kF32, {2, 3}},           {"f16.weight", o_f16, 10, DType::kF16, {5}},
        {"bf16.weight", o_bf16, 48, DType::kBF16, {4, 3, 2}},     {"q8.weight", o_q8, 204, DType::kQ8_0, {3, 64}},
        {"q4k.weight", o_q4k, 576, DType::kQ4_K, {2, 1, 2, 256}},
    };
    for (size_t k = 0; k < 5; ++k) {
        const GgufTensorInfo& t = c.tensors[k];
        SCOPED_TRACE(t.name);
        EXPECT_EQ(t.name, want[k].name);
        EXPECT_EQ(t.offset, want[k].offset);
        EXPECT_EQ(t.offset % 32, 0u);
        EXPECT_EQ(t.nbytes, want[k].nbytes);
        EXPECT_TRUE(t.supported);
        EXPECT_EQ(t.data, base + c.data_offset + t.offset);
        EXPECT_EQ(t.data[0], uint8_t(k * 31));   // the builder's pattern
        const Tensor x = t.tensor();
        EXPECT_EQ(x.dtype, want[k].dtype);
        ASSERT_EQ(x.rank, int(want[k].shape.size()));
        for (int d = 0; d < x.rank; ++d) EXPECT_EQ(x.shape[size_t(d)], want[k].shape[size_t(d)]);
        EXPECT_EQ(x.data, static_cast<const void*>(t.data));
        EXPECT_EQ(x.nbytes(), t.nbytes);
    }
    EXPECT_EQ(c.tensors[4].ne, (std::vector<int64_t>{256, 2, 1, 2}));
    EXPECT_EQ(c.tensors.back().data + c.tensors.back().nbytes, base + f.size());
}

TEST(Gguf, CustomAlignmentAndV2) {
    GgufBuilder b;
    b.alignment = 64;
    b.version = 2;
    b.kv<uint32_t>("general.alignment", GgufType::kU32, 64);
    b.tensor("a", {3}, kF32, 12);
    b.tensor("b", {32}, kQ8_0, 34);
    const std::string f = b.bytes();
    const GgufContents c = parse(f);
    EXPECT_EQ(c.version, 2u);
    EXPECT_EQ(c.alignment, 64u);
    EXPECT_EQ(c.data_offset % 64, 0u);
    ASSERT_EQ(c.tensors.size(), 2u);
    EXPECT_EQ(c.tensors[1].offset, 64u);
    EXPECT_EQ(c.tensors[1].data, reinterpret_cast<const unsigned char*>(f.data()) + c.data_offset + 64);
    // offset 32 is aligned for the default, not for 64
    GgufBuilder m;
    m.kv<uint32_t>("general.alignment", GgufType::kU32, 64);
    m.alignment = 64;
    m.tensor("a", {3}, kF32, 12);
    m.tensor_at("b", {3}, kF32, 32).data(64);
    expect_error(m.bytes(), "tensor 'b': offset 32 is not a multiple of the alignment 64");
}

TEST(Gguf, NoTensorsAndEmptyTensors) {
    GgufBuilder b;
    b.kv_str("k", "v");
    const GgufContents c = parse(b.bytes());   // no padding after the metadata
    EXPECT_TRUE(c.tensors.empty());
    EXPECT_LE(c.data_offset, b.bytes().size());
    GgufBuilder e;   // ggml accepts a zero-size dimension
    e.tensor("empty", {0, 4}, kF32, 0);
    e.tensor("one", {1}, kF32, 4);
    const GgufContents ce = parse(e.bytes());
    EXPECT_EQ(ce.tensors[0].nbytes, 0u);
    EXPECT_EQ(ce.tensors[0].tensor().numel(), 0);
}

TEST(Gguf, TruncatedAtEveryByte) {
    const std::string f = small_file();
    parse(f);
    for (size_t n = 0; n < f.size(); ++n) {
        SCOPED_TRACE(n);
        // a copy of exactly n bytes, so ASan catches any read past it
        std::vector<unsigned char> prefix(f.begin(), f.begin() + std::ptrdiff_t(n));
        EXPECT_THROW(parse_gguf(prefix.data(), prefix.size(), "x.gguf"), Error);
    }
    expect_error(f.substr(0, 2), "truncated (magic");
    expect_error(f.substr(0, f.size() - 1), "tensor 'q': data");
}

TEST(Gguf, RandomMutationsNeverCrash) {
    const std::string good = small_file();
    Rng rng(5);
    int errors = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::string f = good;
        const int n_mut = 1 + int(rng.below(4));
        for (int k = 0; k < n_mut; ++k) {
            const size_t pos = size_t(rng.below(f.size()));
            switch (rng.below(3)) {
                case 0: f[pos] = char(rng.below(256)); break;
                case 1: f[pos] = char(0xff); break;
                default: f.erase(pos, 1 + size_t(rng.below(8))); break;
            }
            if (f.empty()) f = "x";
        }
        std::vector<unsigned char> buf(f.begin(), f.end());
        try {
            parse_gguf(buf.data(), buf.size(), "fuzz");
        } catch (const Error&) {
            ++errors;
        }
    }
    EXPECT_GT(errors, 1000);
}

TEST(Gguf, HeaderErrors) {
    std::string f = small_file();
    f[0] = 'X';
    expect_error(f, "not a GGUF file (magic 'XGUF'");
    GgufBuilder v1;
    v1.version = 1;
    expect_error(v1.bytes(), "GGUF v1 is not supported");
    GgufBuilder be;
    be.version = 0x03000000;   // v3 written big-endian
    expect_error(be.bytes(), "big-endian GGUF is not supported");
    GgufBuilder v4;
    v4.version = 4;
    expect_error(v4.bytes(), "GGUF version 4 is not supported");
    GgufBuilder v0;
    v0.version = 0;
    expect_error(v0.bytes(), "GGUF version 0");
    // counts larger than the file could hold
    std::string many = small_file();
    const uint64_t huge = uint64_t(1) << 62;
    std::memcpy(&many[8], &huge, 8);
    expect_error(many, "tensor count 4611686018427387904 does not fit");
    many = small_file();
    std::memcpy(&many[16], &huge, 8);
    expect_error(many, "kv count 4611686018427387904 does not fit");
}

TEST(Gguf, MetadataErrors) {
    std::string rec;
    GgufBuilder::put<uint64_t>(rec, uint64_t(1) << 63);   // key length
    rec += "abcdefgh";
    expect_error(GgufBuilder().kv_raw(rec).bytes(), "key 0: length 9223372036854775808 exceeds the limit");
    rec.clear();
    GgufBuilder::put<uint64_t>(rec, 1000);   // key length past the end
    rec += "abcdefgh";
    expect_error(GgufBuilder().kv_raw(rec).bytes(), "truncated (key 0 at byte 32 needs 1000 bytes, 8 left)");
    rec.clear();
    GgufBuilder::put_str(rec, "");
    GgufBuilder::put<uint32_t>(rec, 4);
    GgufBuilder::put<uint32_t>(rec, 0);
    expect_error(GgufBuilder().kv_raw(rec).bytes(), "key 0 is empty");

    // a string value of 2^40 bytes (over the 1 GiB cap), then one just past the end
    auto str_kv = [](uint64_t len) {
        std::string r;
        GgufBuilder::put_str(r, "s");
        GgufBuilder::put<uint32_t>(r, uint32_t(GgufType::kString));
        GgufBuilder::put<uint64_t>(r, len);
        r += "xyz";
        return GgufBuilder().kv_raw(r).bytes();
    };
    expect_error(str_kv(uint64_t(1) << 40), "key 's': length 1099511627776 exceeds the limit of 1073741824");
    expect_error(str_kv(4), "truncated (key 's' at byte");

    // arrays: a huge count, a count one past the bytes, strings, nesting, unknown types
    auto arr_kv = [](uint32_t elem, uint64_t count, const std::string& payload) {
        std::string r;
        GgufBuilder::put_str(r, "a");
        GgufBuilder::put<uint32_t>(r, uint32_t(GgufType::kArray));
        GgufBuilder::put<uint32_t>(r, elem);
        GgufBuilder::put<uint64_t>(r, count);
        return GgufBuilder().kv_raw(r + payload).bytes();
    };
    expect_error(arr_kv(uint32_t(GgufType::kU64), uint64_t(1) << 61, std::string(16, '\0')),
                 "key 'a': array of 2305843009213693952 u64 runs past the end of the file");
    expect_error(arr_kv(uint32_t(GgufType::kU32), 5, std::string(16, '\0')), "array of 5 u32 runs past");
    expect_error(arr_kv(uint32_t(GgufType::kString), uint64_t(1) << 60, std::string(16, '\0')),
                 "array of 1152921504606846976 string runs past");
    std::string strs;
    GgufBuilder::put<uint64_t>(strs, 1);
    strs += "a";
    GgufBuilder::put<uint64_t>(strs, 100);   // second string past the end
    strs += "b";
    expect_error(arr_kv(uint32_t(GgufType::kString), 2, strs), "key 'a' element 1");
    expect_error(arr_kv(uint32_t(GgufType::kArray), 1, std::string(16, '\0')),
                 "key 'a': nested arrays are not supported");
    expect_error(arr_kv(13, 1, std::string(16, '\0')), "key 'a': unknown array element type 13");
    rec.clear();
    GgufBuilder::put_str(rec, "t");
    GgufBuilder::put<uint32_t>(rec, 13);
    GgufBuilder::put<uint32_t>(rec, 0);
    expect_error(GgufBuilder().kv_raw(rec).bytes(), "key 't': unknown value type 13");

    GgufBuilder dup;
    dup.kv<uint32_t>("k", GgufType::kU32, 1).kv_str("k", "again");
    expect_error(dup.bytes(), "duplicate key 'k'");
    GgufBuilder odd;   // names in messages: one line, at most 100 bytes
    odd.kv_str("a\nb", "x").kv_str("a\nb", "y");
    expect_error(odd.bytes(), "duplicate key 'a?b'");
    GgufBuilder longkey;
    longkey.kv_str(std::string(300, 'k'), "x").kv_str(std::string(300, 'k'), "y");
    expect_error(longkey.bytes(), "duplicate key '" + std::string(100, 'k') + "...'");
}

TEST(Gguf, AlignmentErrors) {
    for (uint32_t a : {0u, 48u, 3u}) {
        GgufBuilder b;
        b.kv<uint32_t>("general.alignment", GgufType::kU32, a);
        expect_error(b.bytes(), "general.alignment " + std::to_string(a) + " is not a nonzero power of two");
    }
    GgufBuilder b;
    b.kv<int32_t>("general.alignment", GgufType::kI32, 32);
    expect_error(b.bytes(), "key 'general.alignment' is i32, expected u32");
}

TEST(Gguf, TensorInfoErrors) {
    auto one = [](const std::string& name, const std::vector<int64_t>& ne, uint32_t type, uint64_t offset,
                  uint64_t data) { return GgufBuilder().tensor_at(name, ne, type, offset).data(data).bytes(); };
    parse(one("t", {3}, kF32, 0, 12));   // the helper makes valid files
    expect_error(one("", {3}, kF32, 0, 12), "tensor 0: empty name");
    expect_error(one(std::string(64, 'n'), {3}, kF32, 0, 12), "tensor 0: name of 64 bytes exceeds ggml's limit of 63");
    parse(one(std::string(63, 'n'), {3}, kF32, 0, 12));
    expect_error(one("t", {}, kF32, 0, 12), "tensor 't': 0 dimensions (1..4 accepted)");
    expect_error(one("t", {1, 1, 1, 1, 1}, kF32, 0, 12), "tensor 't': 5 dimensions");
    expect_error(one("t", {3, -1}, kF32, 0, 12), "tensor 't': ne[1] = -1 is negative");
    expect_error(one("t", {int64_t(1) << 32, int64_t(1) << 31}, kF32, 0, 12),
                 "tensor 't': element count overflows int64");
    expect_error(one("t", {int64_t(1) << 62, 1, 2}, kF32, 0, 12), "element count overflows");
    // an empty dimension does not hide an overflow of the others (a Tensor multiplies its shape
    // in the other order; found by fuzz_gguf)
    expect_error(one("t", {int64_t(1) << 40, 0, int64_t(1) << 40}, kF32, 0, 12), "element count overflows");
    expect_error(one("t", {int64_t(1) << 62}, kF32, 0, 12), "tensor 't': size in bytes overflows");
    expect_error(one("t", {33}, kQ8_0, 0, 64), "tensor 't': ne[0] = 33 is not a multiple of the Q8_0 block (32)");
    expect_error(one("t", {3}, 99, 0, 12), "tensor 't': type 99 is not a ggml type");
    expect_error(one("t", {3}, 4, 0, 12), "tensor 't': type 4 is not a ggml type");   // Q4_2, removed
    expect_error(one("t", {3}, kF32, 1, 16), "tensor 't': offset 1 is not a multiple of the alignment 32");
    expect_error(one("t", {3}, kF32, 32, 40), "tensor 't': data [32, +12) runs past the data section (40 bytes");
    expect_error(one("t", {3}, kF32, uint64_t(-32), 40), "runs past the data section");
    expect_error(one("t", {4}, kF32, 0, 15), "runs past the data section (15 bytes");

    GgufBuilder dup;
    dup.tensor("w", {2}, kF32, 8);
    dup.tensor("w", {2}, kF32, 8);
    expect_error(dup.bytes(), "duplicate tensor 'w'");
    GgufBuilder ov;
    ov.tensor_at("a", {16}, kF32, 0).tensor_at("b", {4}, kF32, 32).data(64);
    expect_error(ov.bytes(), "tensor data ranges overlap (at data byte 32)");
    GgufBuilder same;   // the same bytes twice
    same.tensor_at("a", {4}, kF32, 0).tensor_at("b", {4}, kF32, 0).data(16);
    expect_error(same.bytes(), "overlap");
    GgufBuilder order;   // out of order but disjoint: accepted
    order.tensor_at("a", {4}, kF32, 32).tensor_at("b", {4}, kF32, 0).data(48);
    EXPECT_EQ(parse(order.bytes()).tensors[0].offset, 32u);
    GgufBuilder pad;   // the padding before the data section runs past the end
    pad.tensor_at("a", {0}, kF32, 0);
    std::string f = pad.bytes();
    expect_error(f.substr(0, f.size() - 1), "truncated (the data section starts at byte");
}

TEST(Gguf, TypeTables) {
    // every block DType: its ggml id, the same geometry as dtype.h
    const std::pair<uint32_t, DType> ids[] = {
        {0, DType::kF32},         {1, DType::kF16},      {30, DType::kBF16},   {2, DType::kQ4_0},
        {3, DType::kQ4_1},        {6, DType::kQ5_0},     {7, DType::kQ5_1},    {8, DType::kQ8_0},
        {10, DType::kQ2_K},       {11, DType::kQ3_K},    {12, DType::kQ4_K},   {13, DType::kQ5_K},
        {14, DType::kQ6_K},       {16, DType::kIQ2_XXS}, {17, DType::kIQ2_XS}, {18, DType::kIQ3_XXS},
        {19, DType::kIQ1_S},      {20, DType::kIQ4_NL},  {21, DType::kIQ3_S},  {22, DType::kIQ2_S},
        {23, DType::kIQ4_XS},     {29, DType::kIQ1_M},   {34, DType::kTQ1_0},  {35, DType::kTQ2_0},
        {39, DType::kMXFP4_GGML},
    };
    for (const auto& [id, dt] : ids) {
        SCOPED_TRACE(id);
        DType got;
        ASSERT_TRUE(ggml_type_dtype(id, got));
        EXPECT_EQ(got, dt);
        BlockShape b{};
        ASSERT_TRUE(ggml_type_block(id, b));
        EXPECT_EQ(b.elems, dtype_block(dt).elems);
        EXPECT_EQ(b.bytes, dtype_block(dt).bytes);
        if (dt != DType::kMXFP4_GGML) {
            EXPECT_EQ(ggml_type_name(id), dtype_name(dt));
        }
    }
    EXPECT_EQ(ggml_type_name(39), "MXFP4");
    // types kimi.cpp does not read: geometry only
    const struct {
        uint32_t id;
        const char* name;
        BlockShape b;
    } others[] = {{9, "Q8_1", {32, 36}},   {15, "Q8_K", {256, 292}}, {24, "I8", {1, 1}},  {25, "I16", {1, 2}},
                  {26, "I32", {1, 4}},     {27, "I64", {1, 8}},      {28, "F64", {1, 8}}, {40, "NVFP4", {64, 36}},
                  {41, "Q1_0", {128, 18}}, {42, "Q2_0", {64, 18}}};
    for (const auto& o : others) {
        SCOPED_TRACE(o.name);
        DType d;
        EXPECT_FALSE(ggml_type_dtype(o.id, d));
        BlockShape b{};
        ASSERT_TRUE(ggml_type_block(o.id, b));
        EXPECT_EQ(b.elems, o.b.elems);
        EXPECT_EQ(b.bytes, o.b.bytes);
        EXPECT_EQ(ggml_type_name(o.id), o.name);
    }
    for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 99u, 0xffffffffu}) {
        BlockShape b{};
        DType d;
        EXPECT_FALSE(ggml_type_block(id, b));
        EXPECT_FALSE(ggml_type_dtype(id, d));
        EXPECT_EQ(ggml_type_name(id), "type " + std::to_string(id));
    }
    EXPECT_STREQ(gguf_type_name(GgufType::kString), "string");
    EXPECT_STREQ(gguf_type_name(GgufType::kF64), "f64");

    // a type kimi.cpp does not read parses, and tensor() names it
    GgufBuilder b;
    b.tensor("act", {32, 2}, kQ8_1, 72);
    const GgufContents c = parse(b.bytes());
    EXPECT_FALSE(c.tensors[0].supported);
    EXPECT_EQ(c.tensors[0].nbytes, 72u);
    expect_throws([&] { (void)c.tensors[0].tensor(); }, "tensor 'act': type Q8_1 is not supported by kimi.cpp");
}

TEST(Gguf, FileAndTypedGetters) {
    const std::string dir = test::temp_dir("gguf");
    GgufBuilder b;
    b.kv<uint8_t>("u8", GgufType::kU8, 9)
        .kv<int16_t>("i16", GgufType::kI16, -7)
        .kv<uint64_t>("u64.big", GgufType::kU64, ~uint64_t(0))
        .kv<uint64_t>("u64", GgufType::kU64, 123)
        .kv<float>("f32", GgufType::kF32, 0.5f)
        .kv<double>("f64", GgufType::kF64, -2.25)
        .kv<uint8_t>("flag", GgufType::kBool, 0)
        .kv_str("name", "k3")
        .kv_array<uint16_t>("a.u16", GgufType::kU16, {1, 65535})
        .kv_array<int64_t>("a.i64", GgufType::kI64, {-1, int64_t(1) << 50})
        .kv_array<uint64_t>("a.u64big", GgufType::kU64, {1, ~uint64_t(0)})
        .kv_array<double>("a.f64", GgufType::kF64, {0.5, -1.0})
        .kv_array<float>("a.f32", GgufType::kF32, {0.25f})
        .kv_str_array("a.str", {"x", "yz"});
    b.tensor("w", {8}, kF32, 32);
    const std::string path = write_file(dir, "t.gguf", b.bytes());
    for (FileMemory mode : {FileMemory::kMap, FileMemory::kHugeCopy}) {
        const GgufFile f(path, mode);
        EXPECT_EQ(f.path(), path);
        EXPECT_EQ(f.size(), b.bytes().size());
        ASSERT_EQ(f.tensors().size(), 1u);
        EXPECT_EQ(f.tensors()[0].tensor().data, static_cast<const void*>(f.tensors()[0].data));
        EXPECT_EQ(f.tensors()[0].data[1], 1u);
        EXPECT_TRUE(f.has("u8"));
        EXPECT_EQ(f.find("nope"), nullptr);
        EXPECT_EQ(f.get_int("u8"), 9);
        EXPECT_EQ(f.get_int("i16"), -7);
        EXPECT_EQ(f.get_int("u64"), 123);
        EXPECT_EQ(f.get_float("f32"), 0.5);
        EXPECT_EQ(f.get_float("f64"), -2.25);
        EXPECT_FALSE(f.get_bool("flag"));
        EXPECT_EQ(f.get_string("name"), "k3");
        EXPECT_EQ(f.get_int_array("a.u16"), (std::vector<int64_t>{1, 65535}));
        EXPECT_EQ(f.get_int_array("a.i64"), (std::vector<int64_t>{-1, int64_t(1) << 50}));
        EXPECT_EQ(f.get_float_array("a.f64"), (std::vector<double>{0.5, -1.0}));
        EXPECT_EQ(f.get_float_array("a.f32"), (std::vector<double>{0.25}));
        EXPECT_EQ(f.get_string_array("a.str"), (std::vector<std::string>{"x", "yz"}));
    }
    const GgufFile f(path);
    expect_throws([&] { f.get_int("nope"); }, path + ": key 'nope' is missing");
    expect_throws([&] { f.get_int("f32"); }, path + ": key 'f32' is f32, expected an integer");
    expect_throws([&] { f.get_int("flag"); }, "key 'flag' is bool, expected an integer");
    expect_throws([&] { f.get_int("u64.big"); }, "key 'u64.big' = 18446744073709551615 overflows int64");
    expect_throws([&] { f.get_float("u8"); }, "key 'u8' is u8, expected f32 or f64");
    expect_throws([&] { f.get_bool("u8"); }, "key 'u8' is u8, expected bool");
    expect_throws([&] { f.get_string("a.str"); }, "key 'a.str' is an array of string, expected string");
    expect_throws([&] { f.get_int_array("a.f64"); }, "key 'a.f64' is an array of f64, expected an integer array");
    expect_throws([&] { f.get_int_array("u8"); }, "key 'u8' is u8, expected an integer array");
    expect_throws([&] { f.get_int_array("a.u64big"); }, "key 'a.u64big' element 1 = 18446744073709551615 overflows");
    expect_throws([&] { f.get_float_array("a.i64"); }, "expected an f32 or f64 array");
    expect_throws([&] { f.get_string_array("a.u16"); }, "key 'a.u16' is an array of u16, expected a string array");
    expect_throws([&] { f.get_string_array("missing"); }, "key 'missing' is missing");

    // errors opening: missing file, corrupt file
    expect_throws([&] { GgufFile(dir + "/none.gguf"); }, dir + "/none.gguf: cannot open");
    const std::string bad = write_file(dir, "bad.gguf", std::string("GGUF\x01\0\0\0", 8));
    expect_throws([&] { GgufFile{bad}; }, bad + ": GGUF v1 is not supported");
}

TEST(Gguf, SplitPaths) {
    EXPECT_EQ(gguf_split_paths("m.gguf"), (std::vector<std::string>{"m.gguf"}));
    EXPECT_EQ(
        gguf_split_paths("/d/m-00001-of-00003.gguf"),
        (std::vector<std::string>{"/d/m-00001-of-00003.gguf", "/d/m-00002-of-00003.gguf", "/d/m-00003-of-00003.gguf"}));
    EXPECT_EQ(gguf_split_paths("m-00001-of-00001.gguf"), (std::vector<std::string>{"m-00001-of-00001.gguf"}));
    for (const char* p :
         {"-00001-of-00002.gguf", "m-0001-of-0002.gguf", "m-00001-of-00002.bin", "m-00001-of-0000x.gguf",
          "m-00001_of-00002.gguf", "m-00000-of-00002.gguf", "m-00003-of-00002.gguf", "x"})
        EXPECT_EQ(gguf_split_paths(p), (std::vector<std::string>{p})) << p;
    expect_throws([] { gguf_split_paths("/d/m-00002-of-00003.gguf"); },
                  "/d/m-00002-of-00003.gguf: part 2 of a split model; pass the first part, /d/m-00001-of-00003.gguf");
}

// One part of a split model: split.no / split.count / split.tensors.count, then tensors.
std::string split_part(int no, int count, int total, const std::vector<std::string>& tensors, bool keys = true) {
    GgufBuilder b;
    if (keys) {
        b.kv<uint16_t>("split.no", GgufType::kU16, uint16_t(no));
        b.kv<uint16_t>("split.count", GgufType::kU16, uint16_t(count));
        b.kv<int32_t>("split.tensors.count", GgufType::kI32, total);
    }
    if (no == 0) b.kv_str("general.architecture", "kimi");
    for (const auto& t : tensors) b.tensor(t, {4}, kF32, 16);
    return b.bytes();
}

TEST(Gguf, SplitModel) {
    const std::string dir = test::temp_dir("gguf-split");
    const std::string p1 = write_file(dir, "m-00001-of-00002.gguf", split_part(0, 2, 3, {"a", "b"}));
    const std::string p2 = write_file(dir, "m-00002-of-00002.gguf", split_part(1, 2, 3, {"c"}));
    uint64_t last_done = 0, last_total = 0;
    const GgufModel m(p1, FileMemory::kHugeCopy, [&](uint64_t done, uint64_t total) {
        EXPECT_GE(done, last_done);
        last_done = done, last_total = total;
    });
    ASSERT_EQ(m.parts().size(), 2u);
    EXPECT_EQ(m.first().path(), p1);
    EXPECT_EQ(m.first().get_string("general.architecture"), "kimi");
    EXPECT_EQ(m.total_bytes(), std::filesystem::file_size(p1) + std::filesystem::file_size(p2));
    EXPECT_EQ(last_total, m.total_bytes());
    EXPECT_EQ(last_done, m.total_bytes());
    ASSERT_EQ(m.tensors().size(), 3u);
    EXPECT_EQ(m.tensors().at("a").part, m.parts()[0].get());
    EXPECT_EQ(m.tensors().at("c").part, m.parts()[1].get());
    EXPECT_EQ(m.tensors().at("c").info->name, "c");
    expect_throws([&] { GgufModel{p2}; }, "pass the first part");

    // a single file, with and without split keys
    const std::string one = write_file(dir, "one.gguf", split_part(0, 1, 1, {"a"}, false));
    EXPECT_EQ(GgufModel(one).tensors().size(), 1u);
    write_file(dir, "one.gguf", split_part(0, 1, 1, {"a"}));
    EXPECT_EQ(GgufModel(one).tensors().size(), 1u);
    write_file(dir, "one.gguf", split_part(0, 2, 1, {"a"}));
    expect_throws([&] { GgufModel{one}; },
                  "one.gguf: split.count is 2 but 1 part(s) were found; pass the first part, PREFIX-00001-of-00002");

    // wrong split.count, split.no, split.tensors.count; a tensor in two parts; a missing part
    write_file(dir, "m-00001-of-00002.gguf", split_part(0, 3, 3, {"a", "b"}));
    expect_throws([&] { GgufModel{p1}; }, p1 + ": split.count is 3 but 2 part(s) were found");
    write_file(dir, "m-00001-of-00002.gguf", split_part(0, 2, 3, {"a", "b"}));
    write_file(dir, "m-00002-of-00002.gguf", split_part(0, 2, 3, {"c"}));
    expect_throws([&] { GgufModel{p1}; }, p2 + ": split.no is 0, expected 1");
    write_file(dir, "m-00002-of-00002.gguf", split_part(1, 2, 3, {"c"}, false));
    expect_throws([&] { GgufModel{p1}; }, p2 + ": named as part 2 of 2 but has no split.count");
    GgufBuilder no_index;
    no_index.kv<uint16_t>("split.count", GgufType::kU16, 2);
    no_index.tensor("c", {4}, kF32, 16);
    write_file(dir, "m-00002-of-00002.gguf", no_index.bytes());
    expect_throws([&] { GgufModel{p1}; }, p2 + ": key 'split.no' is missing");
    write_file(dir, "m-00002-of-00002.gguf", split_part(1, 3, 3, {"c"}));
    expect_throws([&] { GgufModel{p1}; }, p2 + ": split.count is 3 but 2 part(s) were found");
    write_file(dir, "m-00002-of-00002.gguf", split_part(1, 2, 3, {"b"}));
    expect_throws([&] { GgufModel{p1}; }, p2 + ": tensor 'b' also appears in " + p1);
    write_file(dir, "m-00002-of-00002.gguf", split_part(1, 2, 3, {"c", "d"}));
    expect_throws([&] { GgufModel{p1}; }, p1 + ": split.tensors.count is 3 but 4 tensors were found in 2 part(s)");
    write_file(dir, "m-00001-of-00002.gguf", split_part(0, 2, 3, {"a", "b"}, false));
    expect_throws([&] { GgufModel{p1}; }, p1 + ": named as part 1 of 2 but has no split.count");
    std::filesystem::remove(p2);
    expect_throws([&] { GgufModel{p1}; }, p2 + ": part 2 of 2 of the split model is missing");
}

TEST(Gguf, IsGgufPath) {
    const std::string dir = test::temp_dir("gguf-path");
    EXPECT_FALSE(is_gguf_path(dir));
    std::filesystem::create_directory(dir + "/d.gguf");
    EXPECT_FALSE(is_gguf_path(dir + "/d.gguf"));
    EXPECT_TRUE(is_gguf_path(dir + "/absent.gguf"));
    EXPECT_FALSE(is_gguf_path(dir + "/absent"));
    EXPECT_TRUE(is_gguf_path(write_file(dir, "model.bin", small_file())));
    EXPECT_FALSE(is_gguf_path(write_file(dir, "other.bin", "GGU")));
    EXPECT_FALSE(is_gguf_path(write_file(dir, "model.safetensors", "{}")));
}

}   // namespace
}   // namespace kimi
