// Growing the typed arrays of per-frame buffers (spans, runs, clusters, labels).

/**
 * A copy of `array` twice as long (at least `capacity`), its values at the front:
 * buffers that fill item by item double this way rather than allocate per item.
 * @template {Float32Array | Float64Array | Int32Array | Uint32Array | Uint16Array | Uint8Array | Int8Array} T
 * @param {T} array
 * @param {number} [capacity]
 * @returns {T}
 */
export function grown(array, capacity = array.length * 2) {
  const larger = /** @type {T} */ (new /** @type {any} */ (array).constructor(capacity));
  larger.set(array);
  return larger;
}
