import { defineConfig } from 'vitest/config';

// Interop suites boot the Linux kernel under qemu (harness/lab): slow, serial, not in `npm test`'s unit pass.
// Newer kernels check more: the kernel-host and kernel-target suites run again, unchanged, on the 6.12 lab
// (auth-lab.sh) and on the newest Debian kernel (build-newest-kernel.sh, 7.x), each project setting LAB_OUT.
const KERNEL_MATRIX = ['test/interop/kernel-host.test.ts', 'test/interop/kernel-target.test.ts'];
export default defineConfig({
  test: {
    testTimeout: 600_000,
    hookTimeout: 600_000,
    fileParallelism: false,
    // Loopback ports this machine cannot reach, held so no test listens there (docs/testing.md).
    globalSetup: ['test/fixtures/unreachable-ports.ts'],
    // NVME_TCP_TEST_DIGESTS=1: our initiator and raw peers ask for header and data digests (docs/testing.md).
    setupFiles: process.env['NVME_TCP_TEST_DIGESTS'] === '1' ? ['test/fixtures/digests.ts'] : [],
    // One project at a time: every suite boots a qemu guest.
    sequence: { groupOrder: 0 },
    projects: [
      { extends: true, test: { name: 'interop', include: ['test/interop/**/*.test.ts'] } },
      { extends: true, test: { name: 'kernel-6.12', include: KERNEL_MATRIX, env: { LAB_OUT: '/var/tmp/nvme-lab-bpo' }, sequence: { groupOrder: 1 } } },
      // The TLS suite on the TLS lab built over the 7.x kernel (tls7-lab.sh); ensureLab() keeps that kernel.
      { extends: true, test: { name: 'tls-7', include: ['test/interop/tls-kernel.test.ts'], env: { LAB_TLS_OUT: process.env['LAB_TLS7_OUT'] ?? '/var/tmp/nvme-lab-tls7', LAB_TLS_KERNEL_LAB: process.env['LAB7_OUT'] ?? '/var/tmp/nvme-lab-7' }, sequence: { groupOrder: 3 } } },
      { extends: true, test: { name: 'kernel-7', include: KERNEL_MATRIX, env: { LAB_OUT: process.env['LAB7_OUT'] ?? '/var/tmp/nvme-lab-7' }, sequence: { groupOrder: 2 } } },
    ],
  },
});
