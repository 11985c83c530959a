// The kernel-host interop suite (kernel-host-suite.ts) against the one-process target.
import { kernelHostSuite } from './kernel-host-suite.js';

kernelHostSuite();
