// rsocket-core uses Node's global Buffer; esbuild's --inject makes every free `Buffer` in the
// bundle refer to this export (the `buffer` npm package, a browser implementation).
export { Buffer } from "buffer";
