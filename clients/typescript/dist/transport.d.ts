import * as http from "node:http";
import { Readable } from "node:stream";
/** The runner refused or failed a request (HTTP status >= 400). */
export declare class SandmanError extends Error {
    readonly status: number;
    readonly failureKind: string | null;
    readonly body: unknown;
    readonly requestId: string | null;
    constructor(status: number, body: unknown, requestId: string | null);
}
/** Where the runner listens: "unix:PATH", "unix://PATH", "tcp://HOST:PORT" or "http://HOST:PORT". */
export type Endpoint = {
    socketPath: string;
} | {
    host: string;
    port: number;
};
export declare function parseAddress(address: string): Endpoint;
/** The runner's default unix socket, as `sandman worker start` picks it. */
export declare function defaultAddress(): string;
export type Body = undefined | string | Uint8Array | Readable | AsyncIterable<Uint8Array>;
export interface RequestOptions {
    method: string;
    path: string;
    headers?: Record<string, string>;
    body?: Body;
    signal?: AbortSignal;
    timeoutMs?: number;
}
/** A response whose body has not been read yet. */
export interface RawResponse {
    status: number;
    headers: http.IncomingHttpHeaders;
    requestId: string | null;
    body: http.IncomingMessage;
}
export declare class Transport {
    readonly endpoint: Endpoint;
    readonly token: string | undefined;
    readonly timeoutMs: number;
    constructor(address: string, token: string | undefined, timeoutMs: number);
    /** Sends a request and resolves once the answer's headers are in. */
    open(opts: RequestOptions): Promise<RawResponse>;
    /** A request whose answer is JSON; statuses >= 400 throw SandmanError. */
    json<T>(opts: RequestOptions): Promise<T>;
    /** Throws SandmanError for a refused request, reading its JSON body. */
    check(res: RawResponse): Promise<void>;
}
export declare function readAll(stream: AsyncIterable<Uint8Array | string>): Promise<Buffer>;
/** A query string from defined values (booleans as 1/0, arrays repeated). */
export declare function query(params: Record<string, string | number | boolean | string[] | undefined | null>): string;
