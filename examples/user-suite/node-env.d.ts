// The one Node global this suite uses, for tsc: the repository does not
// install @types/node. A project that has it deletes this file.
declare const process: { env: Record<string, string | undefined> };
