import { defineConfig } from 'vitest/config';

// Interop suites boot the Linux kernel under qemu (../shared/lab): slow, serial, not in `npm test`'s unit pass.
export default defineConfig({
  test: {
    include: ['test/interop/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 600_000,
    fileParallelism: false,
  },
});
