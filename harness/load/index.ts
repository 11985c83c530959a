// Public face of harness/load: the workload engine, job files, verification and the in-memory target.
export * from './types.js';
export { runJobs, EngineError, type EngineOptions, type CpuSample } from './engine.js';
export { parseJobFile, parseFioJobFile, parseJsonJobFile, resolveJobs, formatBs, parseBytes, parseTimeMs, parseBsSplit, parseCpus, CONNECT_KEYS, JobFileError, type ParsedJobFile, type RefusedOptions, type RawOptions, type Geometry } from './job-file.js';
export { stampBlocks, checkBlocks, GenerationMap, VERIFY_MAGIC, VERIFY_HEADER_SIZE } from './verify.js';
export { MemoryBlockTarget, type MemoryTargetOptions } from './memory-target.js';
export { newHistogram, recordNs, summarize, cdfPoints } from './stats.js';
