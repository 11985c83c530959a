/* Shared bits of the C baseline target and load generator: NVMe/TCP PDU constants (TCP Transport 1.0 §3.6.2)
 * and CRC32C (hardware SSE4.2 when the compiler targets it, a table otherwise). */
#ifndef PERF_COMMON_H
#define PERF_COMMON_H
#include <stdint.h>
#include <string.h>
#include <time.h>
#ifdef __SSE4_2__
#include <nmmintrin.h>
#endif

enum { PDU_IC_REQ = 0x00, PDU_IC_RESP = 0x01, PDU_H2C_TERM = 0x02, PDU_C2H_TERM = 0x03, PDU_CMD = 0x04, PDU_RESP = 0x05,
       PDU_H2C_DATA = 0x06, PDU_C2H_DATA = 0x07, PDU_R2T = 0x09 };
enum { F_HDGST = 0x01, F_DDGST = 0x02, F_LAST = 0x04, F_SUCCESS = 0x08 };

static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef __SSE4_2__
static inline uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) { uint64_t v; memcpy(&v, p, 8); c = _mm_crc32_u64(c, v); p += 8; n -= 8; }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#else
static uint32_t crc_table[256];
static inline uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n) {
  if (crc_table[1] == 0)
    for (uint32_t i = 0; i < 256; i++) { uint32_t c = i; for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & -(c & 1)); crc_table[i] = c; }
  while (n--) crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}
#endif
/* NVMe/TCP digests are CRC32C with initial value ~0 and final xor ~0. */
static inline uint32_t crc32c(const uint8_t *p, size_t n) { return ~crc32c_update(~0u, p, n); }

#endif
