// Bytes of the payload: base64 text to bytes (shared by the payload decoder and
// the snapshot page), and any buffer form to a typed array of a contract dtype.

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

/**
 * @typedef {Uint8Array|Uint16Array|Uint32Array|Int32Array|Float32Array|Float64Array} Typed
 * @typedef {"u1"|"u2"|"u4"|"i4"|"f4"|"f8"} Dtype
 */

/** Typed-array constructor of each dtype. @type {Record<Dtype, any>} */
export const CTORS = {
  u1: Uint8Array,
  u2: Uint16Array,
  u4: Uint32Array,
  i4: Int32Array,
  f4: Float32Array,
  f8: Float64Array,
};

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Turn one buffer (DataView, ArrayBuffer, any typed array, base64 string or a
 * plain number array) into a typed array of `dtype`. Views whose byte offset is
 * not a multiple of the element size are copied (typed arrays need alignment).
 * @param {unknown} buf
 * @param {Dtype} dtype
 * @returns {Typed}
 */
export function toTyped(buf, dtype) {
  const Ctor = CTORS[dtype];
  if (!Ctor) throw new Error(`payload: unknown dtype ${JSON.stringify(dtype)}`);
  const size = Ctor.BYTES_PER_ELEMENT;
  if (buf === null || buf === undefined) return new Ctor(0);
  if (Array.isArray(buf)) return Ctor.from(buf.map((value) => (value === null ? NaN : value)));
  /** @type {ArrayBufferLike} */
  let ab;
  let off = 0;
  let len = 0;
  if (typeof buf === "string") {
    const bytes = base64ToBytes(buf);
    ab = bytes.buffer;
    len = bytes.byteLength;
  } else if (buf instanceof ArrayBuffer || (typeof SharedArrayBuffer !== "undefined" && buf instanceof SharedArrayBuffer)) {
    ab = buf;
    len = buf.byteLength;
  } else if (ArrayBuffer.isView(buf)) {
    ab = buf.buffer;
    off = buf.byteOffset;
    len = buf.byteLength;
  } else {
    throw new Error(`payload: a ${dtype} buffer is neither bytes nor an array`);
  }
  const count = Math.floor(len / size);
  if (size === 1) return new Ctor(ab, off, count);
  if (LITTLE_ENDIAN_HOST && off % size === 0) return new Ctor(ab, off, count);
  if (LITTLE_ENDIAN_HOST) return new Ctor(ab.slice(off, off + count * size));
  // Big-endian host: read element by element.
  const dv = new DataView(ab, off, count * size);
  const out = new Ctor(count);
  for (let i = 0; i < count; i++) {
    const byteIndex = i * size;
    out[i] =
      dtype === "u2" ? dv.getUint16(byteIndex, true)
      : dtype === "u4" ? dv.getUint32(byteIndex, true)
      : dtype === "i4" ? dv.getInt32(byteIndex, true)
      : dtype === "f4" ? dv.getFloat32(byteIndex, true)
      : dv.getFloat64(byteIndex, true);
  }
  return out;
}
