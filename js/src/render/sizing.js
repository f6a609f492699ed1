// The timeline's size. Its width: a width of 0 (an output that is hidden, a
// tab in the background, the host swapping its theme CSS) is never painted
// at; that frame is skipped and retried on the next animation frames, since a
// width that comes back before the resize observer looks again is never
// reported by it. A long absence ends the retries, and the resize observer
// reports the width when it comes back. Its height: what the rows need,
// within bounds.

/** Narrowest layout; below it the gutter and plot would overlap. */
export const MIN_WIDTH = 200;
/** Frames retried after a zero width before leaving it to the resize observer (about 2 s). */
export const RETRY_FRAMES = 120;

export class Sizer {
  /**
   * @param {() => number} read the width the timeline has now, 0 when it has none
   * @param {() => void} retry asks for another animation frame
   * @param {number} [retryFrames]
   */
  constructor(read, retry, retryFrames = RETRY_FRAMES) {
    this.read = read;
    this.retry = retry;
    this.retryFrames = retryFrames;
    /** Width of the last painted frame, 0 before the first. */
    this.width = 0;
    this.retries = 0;
    /** Frames skipped for a zero width (a test hook). */
    this.skipped = 0;
  }

  /** The width to paint this frame at; 0: skip this frame (another one is asked for while retries last). */
  frameWidth() {
    const width = this.read();
    if (width > 0) {
      this.retries = 0;
      this.width = Math.max(MIN_WIDTH, width);
      return this.width;
    }
    this.skipped++;
    if (this.retries < this.retryFrames) {
      this.retries++;
      this.retry();
    }
    return 0;
  }

  /** The width for geometry between frames (hit tests, zoom): the live one, else the last painted. */
  current() {
    const width = this.read();
    return Math.max(MIN_WIDTH, width > 0 ? width : this.width);
  }
}

/** Heights in CSS px: the time axis, the overview strip, and the rows area's bounds. */
export const AXIS_H = 26;
export const OVERVIEW_H = 44;
export const MAX_VIEWPORT_H = 560;
export const MIN_VIEWPORT_H = 120;

/**
 * Height of the rows area: what the rows need, at least MIN_VIEWPORT_H and at
 * most the `height` trait (timeline px, less the overview strip) when the
 * kernel sets one, else MAX_VIEWPORT_H. `headH` is what sits above the rows (the
 * axis and the load tracks): past the axis it comes on top of both bounds
 * without the trait, out of the rows' share with it.
 * @param {number} rowsHeight
 * @param {unknown} heightTrait
 * @param {number} [headH]
 */
export function viewportHeight(rowsHeight, heightTrait, headH = AXIS_H) {
  const height = Number(heightTrait);
  const extra = Math.max(0, headH - AXIS_H);
  const least = MIN_VIEWPORT_H + extra;
  const most = Number.isFinite(height) && height > 0 ? Math.max(least, height - OVERVIEW_H) : MAX_VIEWPORT_H + extra;
  return Math.max(least, Math.min(most, headH + rowsHeight + 2));
}
