// Public face of target/backend: the NamespaceBackend interface and its ram/file/null implementations.
export type { BackendSharing, CoherenceHook, IoCallback, NamespaceBackend, ReadCallback } from './types.js';
export { ReadLent } from './types.js';
export { RamBackend, RAM_CHUNK_SIZE } from './ram.js';
export { NullBackend } from './null.js';
export { FileBackend, type FileBackendOptions } from './file.js';
export { FENCED, FencedWriteError, WriteFence, isFencedError } from './write-fence.js';
export { WriterThreadError } from './fenced-writer.js';
export { LbaRangeSet, PersistedLbaRanges, type LbaRange } from './lba-ranges.js';
