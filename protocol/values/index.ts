// Public face of protocol/values: the one parser per kind of value that the config schema, the bin and the harness
// share (sizes, durations, ADDR:PORT). Here, the floor every other folder may import, so cli/ and harness/ need not
// reach into target/config for them.
export { parseSize, type SizeSpec } from './size.js';
export { parseDuration, type TimeUnit } from './duration.js';
export { ipFamily, parseHostPort } from './host-port.js';
