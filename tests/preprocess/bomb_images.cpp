// Image bombs (bomb_images.hpp): JPEG markers written by hand, PNGs through libpng and zlib.
#include "preprocess/bomb_images.hpp"

#include <png.h>
#include <zlib.h>

#include <stdexcept>

namespace yolocu::test {
namespace {

void put16(std::vector<uint8_t>& b, int v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

void marker(std::vector<uint8_t>& b, uint8_t m, int payload) {
  b.push_back(0xFF);
  b.push_back(m);
  put16(b, payload + 2);
}

// A quantisation table of ones and two Huffman tables (DC 0, AC 0) of one 1-bit code for symbol
// 0: a zero DC difference, an end of block.
void tables(std::vector<uint8_t>& b) {
  marker(b, 0xDB, 65);
  b.push_back(0x00);
  b.insert(b.end(), 64, 1);
  marker(b, 0xC4, 2 * 18);
  for (uint8_t cls : {uint8_t{0x00}, uint8_t{0x10}}) {
    b.push_back(cls);
    b.push_back(1);
    b.insert(b.end(), 15, 0);
    b.push_back(0);
  }
}

void frame(std::vector<uint8_t>& b, uint8_t sof, int w, int h, int comps) {
  marker(b, sof, 6 + 3 * comps);
  b.push_back(8);
  put16(b, h);
  put16(b, w);
  b.push_back(static_cast<uint8_t>(comps));
  for (int c = 0; c < comps; ++c) {
    b.push_back(static_cast<uint8_t>(c + 1));
    b.push_back(0x11);
    b.push_back(0);
  }
}

void scan(std::vector<uint8_t>& b, int first_comp, int ncomps, int ss, int se) {
  marker(b, 0xDA, 4 + 2 * ncomps);
  b.push_back(static_cast<uint8_t>(ncomps));
  for (int c = 0; c < ncomps; ++c) {
    b.push_back(static_cast<uint8_t>(first_comp + c + 1));
    b.push_back(0x00);
  }
  b.push_back(static_cast<uint8_t>(ss));
  b.push_back(static_cast<uint8_t>(se));
  b.push_back(0x00);
  b.push_back(0x00);  // the scan's data: eight 1-bit codes
}

void png_to_vector(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

}  // namespace

std::vector<uint8_t> progressive_scan_bomb(int width, int height, int components, int scans) {
  std::vector<uint8_t> b = {0xFF, 0xD8};
  tables(b);
  frame(b, 0xC2, width, height, components);
  scan(b, 0, components, 0, 0);
  for (int k = 1; k < scans; ++k) scan(b, k % components, 1, 1, 63);
  b.push_back(0xFF);
  b.push_back(0xD9);
  return b;
}

std::vector<uint8_t> baseline_size_bomb(int width, int height) {
  std::vector<uint8_t> b = {0xFF, 0xD8};
  tables(b);
  frame(b, 0xC0, width, height, 1);
  scan(b, 0, 1, 0, 63);
  b.push_back(0xFF);
  b.push_back(0xD9);
  return b;
}

std::vector<uint8_t> zero_png(int width, int height, int color_type, int bit_depth) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("zero_png: libpng failed");
  }
  png_set_write_fn(png, &out, png_to_vector, nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), bit_depth, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 9);
  png_set_compression_strategy(png, Z_RLE);  // as small as level 9 for zeros, and fast
  png_set_filter(png, 0, PNG_FILTER_NONE);
  png_write_info(png, info);
  std::vector<uint8_t> row(png_get_rowbytes(png, info), 0);
  for (int y = 0; y < height; ++y) png_write_row(png, row.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> png_header_only(uint32_t width, uint32_t height) {
  std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  std::vector<uint8_t> ihdr = {'I', 'H', 'D', 'R'};
  put32(ihdr, width);
  put32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, not interlaced
  put32(b, 13);
  b.insert(b.end(), ihdr.begin(), ihdr.end());
  put32(b, static_cast<uint32_t>(crc32(0, ihdr.data(), static_cast<uInt>(ihdr.size()))));
  const uint8_t idat[4] = {'I', 'D', 'A', 'T'};  // an empty IDAT: libpng's header read stops there
  put32(b, 0);
  b.insert(b.end(), idat, idat + 4);
  put32(b, static_cast<uint32_t>(crc32(0, idat, 4)));
  return b;
}

}  // namespace yolocu::test
