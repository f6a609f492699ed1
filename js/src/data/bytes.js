// Base64 text to bytes, shared by the payload decoder and the snapshot page.

/**
 * Decode base64 text to bytes (natively where the browser can).
 * @param {string} b64
 * @returns {Uint8Array}
 */
export function base64ToBytes(b64) {
  const native = /** @type {any} */ (Uint8Array).fromBase64;
  if (typeof native === "function") return /** @type {Uint8Array} */ (native(b64));
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
