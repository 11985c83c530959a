// Public face of harness/catalogue: the host-behaviour catalogue (docs/faults.md), its runner, host adapters and
// matrix writer.
export * from './types.js';
export { CATALOGUE, CATALOGUE_NQN, CATALOGUE_PORTS, findCase } from './cases.js';
export { runCatalogue, type CatalogueRun, type HostAdapter, type CaseContext } from './runner.js';
export { judge, readChunks, KERNEL_WARNING } from './verdict.js';
export { CatalogueTarget } from './target.js';
export { writeMatrix, renderMatrixMarkdown, renderMatrixHtml } from './matrix.js';
export { OursHost } from './hosts/ours.js';
export { LinuxLabHost } from './hosts/linux.js';
export { SpdkPerfHost } from './hosts/spdk.js';

/** Host ids `--hosts` takes, in the matrix's column order. */
export const CATALOGUE_HOSTS = ['ours', 'linux-6.1', 'linux-6.12', 'linux-newest', 'spdk-perf'] as const;
