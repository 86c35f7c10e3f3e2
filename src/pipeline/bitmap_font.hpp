// The annotator's bitmap font: 5 x 9 cells (7 rows above the baseline, 2 for descenders), printable
// ASCII letters, digits and the punctuation class names use. Internal to the annotator.
#pragma once

#include <cstdint>

namespace yolocu::detail {

constexpr int kGlyphWidth = 5, kGlyphRows = 9, kGlyphBaseline = 7;

// The rows of `c`'s glyph, top first, bit 4 = leftmost column; '?' for characters it lacks.
const uint8_t* glyph_rows(char c);

}  // namespace yolocu::detail
