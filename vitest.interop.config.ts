import { defineConfig } from 'vitest/config';

// Interop suites boot the Linux kernel under qemu (../shared/lab): slow, serial, not in `npm test`'s unit pass.
// Newer kernels check more: the kernel-host and kernel-target suites run again, unchanged, on the 6.12 lab
// (auth-lab.sh) and on the newest Debian kernel (build-newest-kernel.sh, 7.x), each project setting LAB_OUT.
const KERNEL_MATRIX = ['test/interop/kernel-host.test.ts', 'test/interop/kernel-target.test.ts'];
export default defineConfig({
  test: {
    testTimeout: 600_000,
    hookTimeout: 600_000,
    fileParallelism: false,
    // One project at a time: every suite boots a qemu guest.
    sequence: { groupOrder: 0 },
    projects: [
      { extends: true, test: { name: 'interop', include: ['test/interop/**/*.test.ts'] } },
      { extends: true, test: { name: 'kernel-6.12', include: KERNEL_MATRIX, env: { LAB_OUT: '/var/tmp/nvme-lab-bpo' }, sequence: { groupOrder: 1 } } },
      { extends: true, test: { name: 'kernel-7', include: KERNEL_MATRIX, env: { LAB_OUT: process.env['LAB7_OUT'] ?? '/var/tmp/nvme-lab-7' }, sequence: { groupOrder: 2 } } },
    ],
  },
});
