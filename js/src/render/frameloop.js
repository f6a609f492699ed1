// Frame scheduling and timing: at most one animation frame pending, the last
// frame times (root.stwDebug.frameTimes) and the first paint, which sets the
// root's `data-ready` test hook.

const FRAME_LOG = 600;

export class FrameLoop {
  /**
   * @param {() => void} frame paints one frame
   * @param {number} t0 performance.now() when render() was called
   */
  constructor(frame, t0) {
    this.frame = frame;
    this.renderStart = t0;
    this.raf = 0;
    this.disposed = false;
    /** @type {number[]} */
    this.frameLog = [];
    this.frameCount = 0;
    this.firstPaintMs = -1;
  }

  request() {
    if (this.raf || this.disposed) return;
    this.raf = requestAnimationFrame(() => {
      this.raf = 0;
      if (!this.disposed) this.frame();
    });
  }

  /** @param {number} dt ms the frame's painting took */
  record(dt) {
    this.frameLog.push(dt);
    this.frameCount++;
    if (this.frameLog.length > FRAME_LOG) this.frameLog.splice(0, this.frameLog.length - FRAME_LOG);
  }

  /** @param {HTMLElement} root marked ready after the first frame */
  painted(root) {
    if (this.firstPaintMs < 0) {
      this.firstPaintMs = performance.now() - this.renderStart;
      root.dataset.ready = "1";
    }
  }

  dispose() {
    this.disposed = true;
    cancelAnimationFrame(this.raf);
  }
}
