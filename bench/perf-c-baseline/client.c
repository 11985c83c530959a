/* Raw NVMe/TCP load generator (C, one connection, one thread, blocking socket): the same client is run against the
 * C baseline target and the TypeScript target so their ratio measures the targets, not the clients.
 * Connect sequence as a Linux host does it: admin queue (ICReq, Connect qid 0, Property Set CC.EN=1), then one I/O
 * queue (ICReq with the requested digests, Connect qid 1 with the admin cntlid). Then random reads of <bs> bytes kept
 * at depth <qd> for <seconds>; every reply batch read() is answered with one write() of the resubmissions.
 * Prints one JSON line: iops, MB/s, p50/p99/max latency in µs.
 *   client <port> <qd> <bs> <seconds> [ddgst 0|1] [sqflow-disable 0|1] [ns-bytes] [verify-ddgst 0|1]
 * Without verify-ddgst the digest is negotiated and sent but not recomputed here, so its cost is the target's. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "common.h"
#include <sys/resource.h>

/* This process's user + system CPU time in µs (the client's share of the one pinned CPU). */
static double cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

#define RBUF (4 * 1024 * 1024)
#define BUCKET_NS 50
#define NBUCKETS 400000 /* 20 ms */

static const char *SUBNQN = "nqn.2024-01.io.nvme-ts:bench";
static const char *HOSTNQN = "nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-7000000000be";

static void die(const char *m) { fprintf(stderr, "client: %s (%s)\n", m, strerror(errno)); exit(1); }

static void write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) die("write");
    p += w; n -= (size_t)w;
  }
}

static void read_exact(int fd, uint8_t *p, size_t n) {
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) die("read");
    p += r; n -= (size_t)r;
  }
}

/* Read one whole PDU (setup phase only). */
static size_t read_pdu(int fd, uint8_t *buf) {
  read_exact(fd, buf, 8);
  uint32_t plen = rd32(buf + 4);
  if (plen < 8 || plen > 65536) die("bad plen in setup");
  read_exact(fd, buf + 8, plen - 8);
  return plen;
}

static int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) die("connect");
  return fd;
}

static void ic(int fd, int ddgst) {
  uint8_t p[128] = {0}, r[65536];
  p[0] = PDU_IC_REQ; p[2] = 128; wr32(p + 4, 128);
  p[11] = ddgst ? 2 : 0;
  write_all(fd, p, 128);
  read_pdu(fd, r);
  if (r[0] != PDU_IC_RESP) die("no ICResp");
}

static void sqe_base(uint8_t *sqe, uint8_t opc, uint16_t cid) {
  memset(sqe, 0, 64);
  sqe[0] = opc; sqe[1] = 0x40; wr16(sqe + 2, cid);
}

/* Capsule with optional in-capsule data; returns the CQE DW0. */
static uint32_t capsule(int fd, const uint8_t *sqe, const uint8_t *data, uint32_t dlen, int ddgst) {
  static uint8_t p[72 + 1024 + 4], r[65536];
  memset(p, 0, 8);
  p[0] = PDU_CMD; p[2] = 72;
  memcpy(p + 8, sqe, 64);
  uint32_t plen = 72;
  if (dlen) {
    p[3] = 72;
    memcpy(p + 72, data, dlen);
    plen += dlen;
    if (ddgst) { p[1] = F_DDGST; wr32(p + plen, crc32c(data, dlen)); plen += 4; }
  }
  wr32(p + 4, plen);
  write_all(fd, p, plen);
  read_pdu(fd, r);
  if (r[0] != PDU_RESP) die("expected CapsuleResp");
  uint16_t st = rd16(r + 8 + 14) >> 1;
  if (st != 0) { fprintf(stderr, "client: setup command failed, status 0x%x\n", st); exit(1); }
  return rd32(r + 8);
}

static uint32_t fabrics_connect(int fd, uint16_t qid, uint16_t sqsize, uint16_t cntlid, int sqflow_off, int ddgst) {
  uint8_t sqe[64], d[1024] = {0};
  sqe_base(sqe, 0x7f, 1);
  sqe[4] = 0x01;
  wr32(sqe + 32, 1024); sqe[39] = 0x01;
  wr16(sqe + 42, qid); wr16(sqe + 44, sqsize);
  sqe[46] = sqflow_off ? 0x04 : 0;
  memset(d, 0xbe, 16);
  wr16(d + 16, cntlid);
  memcpy(d + 256, SUBNQN, strlen(SUBNQN));
  memcpy(d + 512, HOSTNQN, strlen(HOSTNQN));
  return capsule(fd, sqe, d, 1024, ddgst);
}

static uint64_t rng = 88172645463325252ull;
static inline uint64_t xorshift(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: client port qd bs seconds [ddgst] [sqflow-off] [ns-bytes]\n"); return 2; }
  int port = atoi(argv[1]), qd = atoi(argv[2]), bs = atoi(argv[3]);
  double seconds = atof(argv[4]);
  int ddgst = argc > 5 && atoi(argv[5]);
  int sqflow_off = argc > 6 && atoi(argv[6]);
  uint64_t ns_bytes = argc > 7 ? strtoull(argv[7], NULL, 0) : 256ull << 20;
  int verify = argc > 8 && atoi(argv[8]);

  int admin = tcp_connect(port);
  ic(admin, 0);
  uint16_t cntlid = (uint16_t)fabrics_connect(admin, 0, 31, 0xffff, 0, 0);
  uint8_t sqe[64];
  sqe_base(sqe, 0x7f, 2);
  sqe[4] = 0x00; /* Property Set */
  sqe[39] = 0x5a;
  wr32(sqe + 44, 0x14); wr32(sqe + 48, 0x460001);
  capsule(admin, sqe, NULL, 0, 0);

  int fd = tcp_connect(port);
  ic(fd, ddgst);
  fabrics_connect(fd, 1, 255, cntlid, sqflow_off, ddgst);

  uint32_t nlb = (uint32_t)bs / 512;
  uint64_t blocks = ns_bytes / 512 / nlb;
  uint64_t *start = calloc((size_t)qd, sizeof *start);
  uint32_t *hist = calloc(NBUCKETS + 1, sizeof *hist);
  uint8_t *rbuf = malloc(RBUF);
  uint8_t *wbuf = malloc((size_t)qd * 72);
  size_t wlen = 0, rlen = 0;
  uint64_t done = 0, maxlat = 0, nreads = 0, nwrites = 0;

#define SUBMIT(cid_)                                                   \
  do {                                                                 \
    uint8_t *p_ = wbuf + wlen;                                         \
    memset(p_, 0, 72);                                                 \
    p_[0] = PDU_CMD; p_[2] = 72; wr32(p_ + 4, 72);                     \
    uint8_t *s_ = p_ + 8;                                              \
    s_[0] = 0x02; s_[1] = 0x40; wr16(s_ + 2, (uint16_t)(cid_));        \
    wr32(s_ + 4, 1);                                                   \
    wr32(s_ + 32, (uint32_t)bs); s_[39] = 0x5a;                        \
    uint64_t lba_ = (xorshift() % blocks) * nlb;                       \
    wr32(s_ + 40, (uint32_t)lba_); wr32(s_ + 44, (uint32_t)(lba_ >> 32)); \
    wr16(s_ + 48, (uint16_t)(nlb - 1));                                \
    start[cid_] = now_ns();                                            \
    wlen += 72;                                                        \
  } while (0)

  uint64_t t0 = now_ns();
  uint64_t end = t0 + (uint64_t)(seconds * 1e9);
  int outstanding = qd, stopping = 0;
  for (int c = 0; c < qd; c++) SUBMIT(c);
  write_all(fd, wbuf, wlen);
  wlen = 0;
  while (outstanding > 0) {
    ssize_t r = read(fd, rbuf + rlen, RBUF - rlen);
    if (r <= 0) die("read during load");
    nreads++;
    rlen += (size_t)r;
    size_t off = 0;
    uint64_t now = now_ns();
    if (now >= end) stopping = 1;
    while (rlen - off >= 8) {
      const uint8_t *p = rbuf + off;
      uint32_t plen = rd32(p + 4);
      if (rlen - off < plen) break;
      int cid = -1;
      if (p[0] == PDU_RESP) {
        cid = rd16(p + 8 + 12);
        if ((rd16(p + 8 + 14) >> 1) != 0) { fprintf(stderr, "client: I/O failed status 0x%x\n", rd16(p + 22) >> 1); return 1; }
      } else if (p[0] == PDU_C2H_DATA) {
        uint32_t dl = rd32(p + 16);
        if (verify && (p[1] & F_DDGST)) {
          if (crc32c(p + p[3], dl) != rd32(p + p[3] + dl)) { fprintf(stderr, "client: data digest mismatch\n"); return 1; }
        }
        if (p[1] & F_SUCCESS) cid = rd16(p + 8);
      } else {
        fprintf(stderr, "client: unexpected PDU type %d\n", p[0]);
        return 1;
      }
      off += plen;
      if (cid < 0) continue;
      if (cid >= qd) { fprintf(stderr, "client: bad cid %d\n", cid); return 1; }
      uint64_t lat = now - start[cid];
      if (lat > maxlat) maxlat = lat;
      uint64_t b = lat / BUCKET_NS;
      hist[b > NBUCKETS ? NBUCKETS : b]++;
      done++;
      if (stopping) outstanding--;
      else SUBMIT(cid);
    }
    if (wlen) { write_all(fd, wbuf, wlen); wlen = 0; nwrites++; }
    memmove(rbuf, rbuf + off, rlen - off);
    rlen -= off;
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  double p50 = 0, p99 = 0;
  uint64_t acc = 0;
  for (int b = 0; b <= NBUCKETS; b++) {
    acc += hist[b];
    if (p50 == 0 && acc >= done / 2) p50 = (b + 0.5) * BUCKET_NS / 1000.0;
    if (p99 == 0 && acc >= done - done / 100) { p99 = (b + 0.5) * BUCKET_NS / 1000.0; break; }
  }
  printf("{\"ios\":%llu,\"iops\":%.0f,\"mbps\":%.1f,\"p50us\":%.2f,\"p99us\":%.2f,\"maxus\":%.1f,\"reads\":%llu,\"writes\":%llu,\"cpuus\":%.0f}\n", (unsigned long long)done, done / secs,
         done * (double)bs / secs / 1e6, p50, p99, maxlat / 1000.0, (unsigned long long)nreads, (unsigned long long)nwrites, cpu_us());
  close(fd);
  close(admin);
  return 0;
}
