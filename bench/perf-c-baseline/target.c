/* Minimal single-threaded epoll NVMe/TCP "target" used only as a performance yardstick (not a controller):
 * answers ICReq (echoing the digest bits), answers every capsule with a successful CapsuleResp (Connect gets
 * cntlid 1 in DW0), and answers Read (opcode 0x02) on any queue with C2HData (+ data digest when negotiated)
 * from a RAM buffer followed by a CapsuleResp. All replies produced by one read() go out in one writev() that
 * points straight into the RAM buffer (no payload copy), which is what the Node target is compared against.
 *   target <port> [ram-MiB]      prints "PORT <n>" once listening (port 0 = ephemeral) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "common.h"

#define RBUF (256 * 1024)
#define MAXIOV 1024
#define HDR_SLAB (MAXIOV * 32)

struct conn {
  int fd;
  int ddgst;
  int qid;     /* from Fabrics Connect: admin (0) or I/O */
  uint32_t cc; /* controller configuration, for CSTS */
  uint8_t *rbuf;
  size_t rlen;
  struct iovec iov[MAXIOV];
  int niov;
  uint8_t slab[HDR_SLAB];
  size_t slab_used;
  uint8_t *pend; /* unsent bytes after a short writev */
  size_t pend_len, pend_off;
};

static uint8_t *ram;
static size_t ram_size;
static int ep;

static uint8_t *slab_take(struct conn *c, size_t n) {
  uint8_t *p = c->slab + c->slab_used;
  c->slab_used += n;
  memset(p, 0, n);
  return p;
}

static void push(struct conn *c, void *p, size_t n) {
  c->iov[c->niov].iov_base = p;
  c->iov[c->niov].iov_len = n;
  c->niov++;
}

static void conn_close(struct conn *c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c->rbuf);
  free(c->pend);
  free(c);
}

/* Send the gathered iovecs; keep whatever the kernel did not take (copied) and wait for EPOLLOUT. */
static int flush(struct conn *c) {
  if (c->niov <= 0) return 0;
  size_t total = 0;
  for (int i = 0; i < c->niov; i++) total += c->iov[i].iov_len;
  ssize_t w = c->pend_len > c->pend_off ? 0 : writev(c->fd, c->iov, c->niov);
  if (w < 0 && errno != EAGAIN) return -1;
  if (w < 0) w = 0;
  if ((size_t)w < total) {
    size_t left = total - (size_t)w;
    size_t have = c->pend_len - c->pend_off;
    uint8_t *n = malloc(have + left);
    if (have) memcpy(n, c->pend + c->pend_off, have);
    size_t skip = (size_t)w, o = have;
    for (int i = 0; i < c->niov; i++) {
      size_t l = c->iov[i].iov_len;
      if (skip >= l) { skip -= l; continue; }
      memcpy(n + o, (uint8_t *)c->iov[i].iov_base + skip, l - skip);
      o += l - skip;
      skip = 0;
    }
    free(c->pend);
    c->pend = n;
    c->pend_len = have + left;
    c->pend_off = 0;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
  }
  c->niov = 0;
  c->slab_used = 0;
  return 0;
}

static void resp(struct conn *c, uint16_t cid, uint32_t dw0) {
  uint8_t *h = slab_take(c, 24);
  h[0] = PDU_RESP; h[2] = 24; wr32(h + 4, 24);
  wr32(h + 8, dw0);
  wr16(h + 8 + 12, cid);
  wr16(h + 8 + 8, 0xffff); /* SQHD: flow control is not tracked here */
  push(c, h, 24);
}

static void resp64(struct conn *c, uint16_t cid, uint64_t v) {
  resp(c, cid, (uint32_t)v);
  wr32(c->slab + c->slab_used - 24 + 8 + 4, (uint32_t)(v >> 32));
}

static const char *SUBNQN = "nqn.2024-01.io.nvme-ts:bench";
static uint8_t zeros[65536];

/* Controller-to-host data for an admin command (Identify, Get Log Page), then its CapsuleResp. */
static void admin_data(struct conn *c, uint16_t cid, const uint8_t *data, uint32_t len) {
  uint8_t *h = slab_take(c, 24);
  h[0] = PDU_C2H_DATA; h[1] = F_LAST | (c->ddgst ? F_DDGST : 0); h[2] = 24; h[3] = 24;
  wr32(h + 4, 24 + len + (c->ddgst ? 4 : 0));
  wr16(h + 8, cid);
  wr32(h + 16, len);
  push(c, h, 24);
  push(c, (void *)data, len);
  if (c->ddgst) {
    uint8_t *d = slab_take(c, 4);
    wr32(d, crc32c(data, len));
    push(c, d, 4);
  }
  resp(c, cid, 0);
}

/* Just enough of an admin queue for a host that brings a controller up like Linux does (the TS initiator): properties
 * CAP/VS/CC/CSTS, Identify (controller, namespace 1, active list), Number of Queues, zeroed log pages, an AER that is
 * never answered. Everything else succeeds. */
static void admin(struct conn *c, const uint8_t *sqe, uint16_t cid) {
  uint8_t op = sqe[0];
  uint32_t len = rd32(sqe + 24 + 8);
  if (len > sizeof zeros) len = sizeof zeros;
  if (op == 0x7f && sqe[4] == 0x04) { /* Property Get */
    uint32_t ofst = rd32(sqe + 44);
    uint64_t v = 0;
    if (ofst == 0x00) v = 1023u | (1u << 16) | (1u << 24) | (1ull << 37); /* CAP: MQES 1023, CQR, TO 500 ms, CSS NVM */
    else if (ofst == 0x08) v = 0x00010400;
    else if (ofst == 0x14) v = c->cc;
    else if (ofst == 0x1c) v = (c->cc & 1) | ((c->cc >> 14) & 3 ? 2u << 2 : 0); /* RDY = EN; SHST complete after SHN */
    resp64(c, cid, v);
    return;
  }
  if (op == 0x7f && sqe[4] == 0x00) { /* Property Set */
    if (rd32(sqe + 44) == 0x14) c->cc = rd32(sqe + 48);
    resp(c, cid, 0);
    return;
  }
  if (op == 0x7f) { resp(c, cid, sqe[4] == 0x01 ? 1 : 0); return; }
  if (op == 0x0c) return; /* Asynchronous Event Request: nothing to report, ever */
  if (op == 0x09) { resp(c, cid, (sqe[40] == 0x07) ? rd32(sqe + 44) : 0); return; } /* Set Features (Number of Queues: as asked) */
  if (op == 0x06) { /* Identify */
    uint8_t *d = slab_take(c, 4096);
    uint8_t cns = sqe[40];
    if (cns == 1) {
      d[77] = 5; wr16(d + 78, 1); wr32(d + 80, 0x00010400); d[111] = 1; /* MDTS 128 KiB, CNTLID 1, VER 1.4, I/O controller */
      wr16(d + 320, 10); d[512] = 0x66; d[513] = 0x44; wr16(d + 514, 1024); wr32(d + 516, 1); wr32(d + 536, 1);
      memcpy(d + 768, SUBNQN, strlen(SUBNQN));
      wr32(d + 1792, 4); wr32(d + 1796, 1);
    } else if (cns == 0 && rd32(sqe + 4) == 1) {
      uint64_t nsze = ram_size / 512;
      memcpy(d, &nsze, 8); memcpy(d + 8, &nsze, 8); memcpy(d + 16, &nsze, 8); d[130] = 9;
    } else if (cns == 2) {
      wr32(d, 1);
    }
    admin_data(c, cid, d, len < 4096 ? len : 4096);
    return;
  }
  if (op == 0x02 && len > 0) { admin_data(c, cid, zeros, len); return; } /* Get Log Page */
  resp(c, cid, 0);
}

static void handle(struct conn *c, const uint8_t *p, uint32_t plen) {
  uint8_t type = p[0];
  if (type == PDU_IC_REQ) {
    c->ddgst = (p[11] & 2) != 0;
    uint8_t *h = slab_take(c, 128);
    h[0] = PDU_IC_RESP; h[2] = 128; wr32(h + 4, 128);
    h[11] = p[11] & 3;
    wr32(h + 12, 131072);
    push(c, h, 128);
    return;
  }
  if (type != PDU_CMD) return;
  const uint8_t *sqe = p + 8;
  uint16_t cid = rd16(sqe + 2);
  if (sqe[0] == 0x7f && sqe[4] == 0x01) { c->qid = rd16(sqe + 42); resp(c, cid, 1); return; }
  if (c->qid == 0) { admin(c, sqe, cid); return; }
  if (sqe[0] != 0x02) { resp(c, cid, 0); return; }
  uint64_t slba = rd32(sqe + 40) | ((uint64_t)rd32(sqe + 44) << 32);
  uint32_t len = (rd16(sqe + 48) + 1u) * 512u;
  uint64_t off = (slba * 512) % (ram_size - len);
  uint8_t *h = slab_take(c, 24);
  h[0] = PDU_C2H_DATA; h[1] = F_LAST | (c->ddgst ? F_DDGST : 0); h[2] = 24; h[3] = 24;
  wr32(h + 4, 24 + len + (c->ddgst ? 4 : 0));
  wr16(h + 8, cid);
  wr32(h + 16, len);
  push(c, h, 24);
  push(c, ram + off, len);
  if (c->ddgst) {
    uint8_t *d = slab_take(c, 4);
    wr32(d, crc32c(ram + off, len));
    push(c, d, 4);
  }
  resp(c, cid, 0);
  (void)plen;
}

static int on_readable(struct conn *c) {
  for (;;) {
    ssize_t r = read(c->fd, c->rbuf + c->rlen, RBUF - c->rlen);
    if (r == 0) return -1;
    if (r < 0) return errno == EAGAIN ? 0 : -1;
    c->rlen += (size_t)r;
    size_t off = 0;
    while (c->rlen - off >= 8) {
      uint32_t plen = rd32(c->rbuf + off + 4);
      if (plen < 8 || plen > RBUF) return -1;
      if (c->rlen - off < plen) break;
      if (c->niov > MAXIOV - 8 || c->slab_used > HDR_SLAB - 256) flush(c);
      handle(c, c->rbuf + off, plen);
      off += plen;
    }
    if (flush(c) < 0) return -1;
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
    if (c->pend_len > c->pend_off) return 0; /* backpressure: wait for EPOLLOUT before reading more */
    if ((size_t)r < RBUF / 2) return 0;
  }
}

static int on_writable(struct conn *c) {
  while (c->pend_off < c->pend_len) {
    ssize_t w = write(c->fd, c->pend + c->pend_off, c->pend_len - c->pend_off);
    if (w < 0) return errno == EAGAIN ? 0 : -1;
    c->pend_off += (size_t)w;
  }
  c->pend_len = c->pend_off = 0;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
  return on_readable(c);
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 0;
  ram_size = (size_t)(argc > 2 ? atoi(argv[2]) : 256) << 20;
  ram = malloc(ram_size);
  for (size_t i = 0; i < ram_size; i++) ram[i] = (uint8_t)(i * 131 + 7);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 512)) { perror("listen"); return 1; }
  socklen_t al = sizeof a;
  getsockname(ls, (struct sockaddr *)&a, &al);
  printf("PORT %d\n", ntohs(a.sin_port));
  fflush(stdout);
  ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    for (int i = 0; i < n; i++) {
      struct conn *c = evs[i].data.ptr;
      if (c == NULL) {
        int fd;
        while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct conn *nc = calloc(1, sizeof *nc);
          nc->fd = fd;
          nc->rbuf = malloc(RBUF);
          struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = nc};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e2);
        }
        continue;
      }
      int rc = (evs[i].events & EPOLLOUT) ? on_writable(c) : on_readable(c);
      if (rc < 0 || (evs[i].events & (EPOLLHUP | EPOLLERR))) conn_close(c);
    }
  }
}
