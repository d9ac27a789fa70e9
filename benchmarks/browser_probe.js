// The browser latency benchmark's probe (benchmarks/browser_latency.py), added to the page
// before JupyterLab loads. It only records timestamps from the page's own clock
// (performance.now()) and the kernel messages' header dates; it changes nothing.
//
// window.__probe.arm() before an input; after it, __probe.record() holds:
//   input:   the first keydown / mousedown after arm() (the event's own timeStamp)
//   sends:   comm messages the page sent to the kernel (time, msg_id)
//   kernel:  messages from the kernel in reply to those: status busy/idle, pictures (comm
//            updates that carry an Image's `value` buffer) and other widget updates (a
//            readout; the moved control's own echo is not one), each with the kernel's
//            date and the time the page's websocket received it, and the picture's size
//   srcs:    each time an explorer picture's <img src> was set
//   paints:  for each src set, when the new picture was decoded and the next frame painted
(() => {
  const probe = {armed: false, log: null};
  const fresh = () => ({input: null, sends: [], kernel: [], srcs: [], paints: []});
  probe.arm = () => { probe.log = fresh(); probe.armed = true; };
  probe.record = () => probe.log;
  probe.timeOrigin = () => performance.timeOrigin;
  window.__probe = probe;

  for (const type of ['keydown', 'mousedown']) {
    window.addEventListener(type, event => {
      if (probe.armed && probe.log.input === null) {
        probe.log.input = {t: event.timeStamp, type};
        probe.armed = false;
      }
    }, true);
  }

  const text = new TextDecoder();
  // A kernel message in either websocket protocol: JSON text, or JupyterLab's binary
  // v1.kernel.websocket.jupyter.org layout (a count of offsets, the offsets, then channel,
  // header, parent header, metadata, content and buffers), or the legacy binary layout.
  function parse(data, protocol) {
    if (typeof data === 'string') {
      const msg = JSON.parse(data);
      return {channel: msg.channel, header: msg.header, parent: msg.parent_header,
              content: msg.content, bufferBytes: 0};
    }
    const bytes = data instanceof ArrayBuffer ? data
      : data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
    const view = new DataView(bytes);
    let parts = [];
    if (protocol === 'v1.kernel.websocket.jupyter.org') {
      const count = Number(view.getBigUint64(0, true));
      const offsets = [];
      for (let i = 0; i < count; i++) offsets.push(Number(view.getBigUint64(8 * (i + 1), true)));
      offsets.push(bytes.byteLength);
      for (let i = 0; i + 1 < offsets.length; i++) parts.push([offsets[i], offsets[i + 1]]);
      const json = i => JSON.parse(text.decode(bytes.slice(parts[i][0], parts[i][1])));
      let bufferBytes = 0;
      for (const [a, b] of parts.slice(5)) bufferBytes += b - a;
      return {channel: text.decode(bytes.slice(parts[0][0], parts[0][1])), header: json(1),
              parent: json(2), content: json(4), bufferBytes};
    }
    const count = view.getUint32(0);  // legacy: big-endian count and offsets, then the JSON
    const offsets = [];
    for (let i = 0; i < count; i++) offsets.push(view.getUint32(4 * (i + 1)));
    offsets.push(bytes.byteLength);
    const msg = JSON.parse(text.decode(bytes.slice(offsets[0], offsets[1])));
    return {channel: msg.channel, header: msg.header, parent: msg.parent_header,
            content: msg.content, bufferBytes: bytes.byteLength - offsets[1]};
  }

  const isPicture = msg => {
    const data = msg.content && msg.content.data;
    return msg.header.msg_type === 'comm_msg' && data && Array.isArray(data.buffer_paths)
      && data.buffer_paths.some(path => path.length === 1 && path[0] === 'value');
  };

  const Native = window.WebSocket;
  const send = Native.prototype.send;
  Native.prototype.send = function (data) {
    const t = performance.now();
    if (probe.log && probe.log.input !== null && this.url.includes('/channels')) {
      try {
        const msg = parse(data, this.protocol);
        if (msg.header.msg_type === 'comm_msg') probe.log.sends.push({t, id: msg.header.msg_id});
      } catch (error) { /* not a kernel message */ }
    }
    return send.call(this, data);
  };
  class ProbedWebSocket extends Native {
    constructor(...args) {
      super(...args);
      // registered before JupyterLab sets onmessage, so it runs first
      this.addEventListener('message', event => {
        const t = performance.now();
        const log = probe.log;
        if (!log || log.sends.length === 0) return;
        try {
          const msg = parse(event.data, this.protocol);
          const ids = new Set(log.sends.map(s => s.id));
          if (!msg.parent || !ids.has(msg.parent.msg_id)) return;
          const method = msg.content && msg.content.data && msg.content.data.method;
          const kind = msg.header.msg_type === 'status' ? msg.content.execution_state
            : isPicture(msg) ? 'picture'
            : msg.header.msg_type === 'comm_msg' && method === 'update' ? 'update' : null;
          if (kind !== null) {
            log.kernel.push({kind, t, date: msg.header.date, parent: msg.parent.msg_id,
                             bytes: msg.bufferBytes});
          }
        } catch (error) { /* not a kernel message */ }
      });
    }
  }
  window.WebSocket = ProbedWebSocket;

  new MutationObserver(mutations => {
    const log = probe.log;
    if (!log) return;
    for (const mutation of mutations) {
      const img = mutation.target;
      if (!(img instanceof HTMLImageElement) || !img.classList.contains('widget-image')) continue;
      const t = performance.now();
      log.srcs.push({t});
      const index = log.srcs.length - 1;
      img.decode().catch(() => null).then(() => requestAnimationFrame(() => {
        // a task queued from the frame callback runs once that frame has been painted
        const channel = new MessageChannel();
        channel.port1.onmessage = () => log.paints.push({index, t: performance.now()});
        channel.port2.postMessage(null);
      }));
    }
  }).observe(document, {subtree: true, attributes: true, attributeFilter: ['src']});
})();
