// The runner's JSON, as docs/http-api.md describes it.
export {};
//# sourceMappingURL=types.js.map