// Pillow 9.4's mode conversions that the preprocessing needs (libImaging/Convert.c and
// Image.convert's transparency rules), byte-identical: any decoded mode → "RGB" / "RGBA", and
// the premultiplied "RGBa" / "La" round trip Pillow resizes RGBA / LA images through.
// Internal to kimi_image.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "image/decoded_image.h"

namespace kimi::image {

// Checks that pixels / palette / transparency fit width × height × mode (kimi::Error if not).
void check_decoded_image(const DecodedImage& img);

// Whether Pillow's pipeline sees alpha: "A" in the bands (LA, RGBA) or info["transparency"]
// (P with palette alpha, "1" / L / I;16 with a transparent grey value).
bool has_alpha(const DecodedImage& img);

// image.convert("RGB"): [h, w, 3]. Alpha and transparency are dropped; P goes through the palette;
// I;16 is clipped to 255; CMYK as Pillow's cmyk2rgb.
std::vector<uint8_t> convert_to_rgb(const DecodedImage& img);

// image.convert("RGBA"): [h, w, 4]. P takes the palette alpha; "1" / L / I;16 with a transparent
// value get alpha 0 where the (clipped) grey equals that value & 0xff, as convert_transparent does.
std::vector<uint8_t> convert_to_rgba(const DecodedImage& img);

// RGBA → RGBa / LA → La in place (alpha is the last of `channels` interleaved bytes).
void premultiply_alpha(std::span<uint8_t> pixels, int channels);
// RGBa → RGBA / La → LA in place.
void unpremultiply_alpha(std::span<uint8_t> pixels, int channels);

}   // namespace kimi::image
