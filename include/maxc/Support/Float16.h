// IEEE half and bfloat16 conversions (round to nearest even), used by the
// interpreter and the weight readers.
#pragma once

#include <cstdint>

namespace maxc {

uint16_t float_to_half_bits(float value);
float half_bits_to_float(uint16_t bits);
uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(uint16_t bits);

} // namespace maxc
