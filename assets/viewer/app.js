// memdir viewer. Plain JavaScript, no dependencies, no build step.
//
// Every view reads through the REST API of this server, and every change (restore, append) is
// a REST call: the same guard, access control and compare-and-swap as any other client. The
// DOM is built with createElement/textContent only (the page's Trusted Types policy forbids
// HTML from strings), so nothing in a memory can become markup.
'use strict';

(() => {
  const TOKEN_KEY = 'memdir.token';
  const SESSION_PAGE = 50;
  const CATALOG_PAGE = 50;
  // A title's length, as the server cuts it.
  const TITLE_CHARS = 80;
  const TYPE_DELAY_MS = 120;
  const main = document.getElementById('main');
  const login = document.getElementById('login');
  const loginForm = document.getElementById('login-form');
  const loginError = document.getElementById('login-error');
  const tokenInput = document.getElementById('token');
  const forget = document.getElementById('forget');
  const toastBox = document.getElementById('toast');

  // ------------------------------------------------------------------------------------------
  // DOM
  // ------------------------------------------------------------------------------------------

  function h(tag, props, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked' || k === 'selected') el[k] = !!v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid == null || kid === false) continue;
      el.append(kid instanceof Node ? kid : String(kid));
    }
    return el;
  }

  function replace(el, ...kids) {
    el.replaceChildren();
    for (const kid of kids.flat(Infinity)) {
      if (kid != null && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
    }
  }

  function time(ts) {
    if (!ts) return h('span', { class: 'muted' }, '—');
    const d = new Date(ts);
    const text = isNaN(d) ? ts : d.toLocaleString();
    return h('time', { datetime: ts, title: ts }, text);
  }

  function bytes(n) {
    if (n == null) return '—';
    const units = ['B', 'KB', 'MB', 'GB', 'TB'];
    let i = 0;
    let v = Number(n);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : String(v)) + ' ' + units[i];
  }

  function short(hash) {
    return hash ? h('code', { title: hash }, hash.slice(0, 12)) : h('span', { class: 'muted' }, 'none');
  }

  let toastTimer = 0;
  function toast(text) {
    toastBox.textContent = text;
    toastBox.classList.add('show');
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => toastBox.classList.remove('show'), 3000);
  }

  // ------------------------------------------------------------------------------------------
  // The API
  // ------------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      const e = (body && body.error) || { code: 'http_' + status, message: 'HTTP ' + status, hints: [] };
      super(e.message);
      this.status = status;
      this.error = e;
    }
  }

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (_) { return null; }
  }

  async function timed(method, path, body, signal) {
    const headers = { Accept: 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const init = { method, headers, signal, credentials: 'omit', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const t0 = performance.now();
    const r = await fetch(path, init);
    const text = await r.text();
    const ms = performance.now() - t0;
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (r.status === 401) {
      askToken(!!t);
      throw new ApiError(401, data);
    }
    if (!r.ok) throw new ApiError(r.status, data);
    return { data, ms };
  }

  async function call(method, path, body, signal) {
    return (await timed(method, path, body, signal)).data;
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== '' && v != null) q.set(k, v);
    return q.toString();
  }

  function errorBox(e) {
    if (e instanceof ApiError) {
      const err = e.error;
      const extra = [];
      if (err.details && err.details.current_hash) extra.push(h('p', null, 'Current hash: ', h('code', null, err.details.current_hash)));
      if (err.current_hash) extra.push(h('p', null, 'Current hash: ', h('code', null, err.current_hash)));
      return h('div', { class: 'alert', role: 'alert', 'data-code': err.code },
        h('strong', null, label(err.code) + ': '), err.message, extra,
        (err.hints || []).length ? h('ul', null, err.hints.map((x) => h('li', null, x))) : null);
    }
    return h('div', { class: 'alert', role: 'alert' }, String(e && e.message || e));
  }

  function label(code) {
    return ({ conflict: 'Conflict', forbidden: 'Not allowed', not_found: 'Not found', unauthorized: 'Token required',
      invalid: 'Invalid', busy: 'Busy', corrupt: 'Corrupt file' })[code] || 'Error';
  }

  // ------------------------------------------------------------------------------------------
  // Token
  // ------------------------------------------------------------------------------------------

  function askToken(refused) {
    loginError.hidden = !refused;
    loginError.textContent = refused ? 'That token was refused. Enter the token the server was started with.' : '';
    if (refused) { try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage off */ } }
    forget.hidden = true;
    if (login.hidden) {
      login.hidden = false;
      tokenInput.value = '';
    }
    tokenInput.focus();
  }

  loginForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = tokenInput.value.trim();
    if (!t) return;
    try { sessionStorage.setItem(TOKEN_KEY, t); } catch (_) { /* storage off: this load only */ }
    login.hidden = true;
    forget.hidden = false;
    render(true);
  });

  forget.addEventListener('click', () => {
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage off */ }
    forget.hidden = true;
    render(true);
  });

  // ------------------------------------------------------------------------------------------
  // Routes: #/view/arg?params
  // ------------------------------------------------------------------------------------------

  function route() {
    const raw = location.hash.replace(/^#\/?/, '');
    const qi = raw.indexOf('?');
    const path = qi < 0 ? raw : raw.slice(0, qi);
    const params = new URLSearchParams(qi < 0 ? '' : raw.slice(qi + 1));
    const [view, ...rest] = path.split('/');
    let arg = rest.length ? rest.join('/') : null;
    try { arg = arg == null ? null : decodeURIComponent(arg); } catch (_) { /* keep as is */ }
    return { view: view || 'sessions', arg, params };
  }

  function link(view, arg, params) {
    const q = params ? query(params) : '';
    return '#/' + view + (arg != null ? '/' + encodeURIComponent(arg) : '') + (q ? '?' + q : '');
  }

  let generation = 0;
  const VIEWS = { sessions: viewSessions, session: viewSession, search: viewSearch, categories: viewCategories,
    category: viewCategory, notes: viewNotes, note: viewNote, status: viewStatus };

  async function render(navigated) {
    const gen = ++generation;
    if (navigated) titles.clear();
    const r = route();
    const view = VIEWS[r.view] || viewSessions;
    const section = { session: 'sessions', category: 'categories', note: 'notes' }[r.view] || (VIEWS[r.view] ? r.view : 'sessions');
    for (const a of document.querySelectorAll('nav a')) {
      if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    forget.hidden = !token();
    const live = () => gen === generation;
    try {
      await view(r, live);
    } catch (e) {
      if (!live()) return;
      if (e instanceof ApiError && e.status === 401) {
        replace(main, h('h1', null, 'Token required'), h('p', null, 'Enter the token to see this memory.'));
      } else {
        main.append(errorBox(e));
      }
    }
    const active = document.activeElement;
    if (navigated && live() && (active === main || !main.contains(active)) && login.hidden) {
      const target = main.querySelector('[data-autofocus]') || main;
      target.focus({ preventScroll: target === main });
    }
  }

  window.addEventListener('hashchange', () => render(true));

  document.addEventListener('keydown', (ev) => {
    if (ev.key !== '/' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    ev.preventDefault();
    const q = document.getElementById('q');
    if (q) q.focus();
    else location.hash = link('search');
  });

  // ------------------------------------------------------------------------------------------
  // Highlighting the matching words
  // ------------------------------------------------------------------------------------------

  const STOP = new Set(['a', 'an', 'and', 'are', 'as', 'at', 'be', 'by', 'for', 'in', 'is', 'it', 'of', 'on', 'or', 'the', 'to', 'was', 'with']);

  function escapeRe(s) {
    return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }

  function stem(w) {
    for (const s of ['ing', 'ed', 'es', 's']) if (w.length - s.length >= 4 && w.endsWith(s)) return w.slice(0, -s.length);
    return w;
  }

  // What to mark for a query: the literal for an exact search, else every word (a word in the
  // text marks when it starts with the query word's stem, as the analyzer stems both). Words
  // are split as the index splits them: letters and digits, so `_`, `-` and `.` separate the
  // parts of an identifier (`redis` is found, and marked, in `redis_eviction`).
  function matcher(q, engine) {
    q = (q || '').trim();
    if (!q) return null;
    if (engine === 'exact') {
      const lit = q.replace(/^"([\s\S]*)"$/, '$1');
      return lit ? new RegExp(escapeRe(lit), 'giu') : null;
    }
    const words = (q.toLowerCase().match(/[\p{L}\p{M}\p{N}]+/gu) || []).filter((w) => !STOP.has(w)).map(stem);
    if (!words.length) return null;
    words.sort((a, b) => b.length - a.length);
    return new RegExp('(?<![\\p{L}\\p{M}\\p{N}])(?:' + words.map(escapeRe).join('|') + ')[\\p{L}\\p{M}\\p{N}]*', 'giu');
  }

  function highlight(text, re) {
    text = text == null ? '' : String(text);
    const frag = document.createDocumentFragment();
    if (!re) { frag.append(text); return frag; }
    let at = 0;
    for (const m of text.matchAll(re)) {
      if (!m[0]) continue;
      frag.append(text.slice(at, m.index), h('mark', null, m[0]));
      at = m.index + m[0].length;
    }
    frag.append(text.slice(at));
    return frag;
  }

  // ------------------------------------------------------------------------------------------
  // Markdown: a safe subset, built as DOM nodes
  // ------------------------------------------------------------------------------------------

  // Headings, paragraphs (line breaks kept), fenced code, block quotes, lists, tables, rules;
  // inline code, bold, italics, strike-through and http(s)/mailto links. Every piece of text
  // becomes a text node (marked where the query matches), never markup: HTML in a memory is
  // shown as the characters it is, and a link to anything but http(s) or mailto stays text.

  const INLINE = new RegExp([
    '(`+)([^`][\\s\\S]*?)\\1(?!`)', // code: 1 fence, 2 text
    '\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*', // 3 bold
    '(?<![\\p{L}\\p{N}_])__(?=\\S)([\\s\\S]*?\\S)__(?![\\p{L}\\p{N}_])', // 4 bold
    '\\*(?=[^\\s*])([\\s\\S]*?[^\\s*])\\*', // 5 italics
    '(?<![\\p{L}\\p{N}_])_(?=[^\\s_])([\\s\\S]*?[^\\s_])_(?![\\p{L}\\p{N}_])', // 6 italics
    '~~(?=\\S)([\\s\\S]*?\\S)~~', // 7 struck
    '\\[([^\\]\\n]+)\\]\\(((?:https?:\\/\\/|mailto:)[^\\s()]+)\\)', // 8 text, 9 URL
  ].join('|'), 'gu');

  function inline(text, re) {
    const frag = document.createDocumentFragment();
    let at = 0;
    for (const m of text.matchAll(INLINE)) {
      frag.append(highlight(text.slice(at, m.index), re));
      at = m.index + m[0].length;
      if (m[2] != null) frag.append(h('code', null, highlight(m[2], re)));
      else if (m[3] != null || m[4] != null) frag.append(h('strong', null, inline(m[3] ?? m[4], re)));
      else if (m[5] != null || m[6] != null) frag.append(h('em', null, inline(m[5] ?? m[6], re)));
      else if (m[7] != null) frag.append(h('del', null, inline(m[7], re)));
      else frag.append(h('a', { href: m[9], rel: 'noopener noreferrer', target: '_blank' }, inline(m[8], re)));
    }
    frag.append(highlight(text.slice(at), re));
    return frag;
  }

  // Lines joined with line breaks, each line's inline markup rendered.
  function lines(ls, re) {
    return ls.flatMap((l, i) => (i ? [h('br'), inline(l, re)] : [inline(l, re)]));
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  function cells(line) {
    return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
  }

  function markdown(text, re) {
    const src = String(text == null ? '' : text).replace(/\r\n?/g, '\n').split('\n');
    const out = h('div', { class: 'md' });
    let i = 0;
    const starts = (l) => FENCE.test(l) || HEADING.test(l) || RULE.test(l) || ITEM.test(l) || QUOTE.test(l);
    while (i < src.length) {
      const line = src[i];
      let m;
      if (!line.trim()) { i++; continue; }
      if ((m = FENCE.exec(line))) {
        const fence = m[1];
        const body = [];
        const closes = (l) => {
          const c = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(l);
          return c && c[1][0] === fence[0] && c[1].length >= fence.length;
        };
        for (i++; i < src.length && !closes(src[i]); i++) body.push(src[i]);
        i++;
        out.append(h('pre', { class: 'code' }, h('code', null, highlight(body.join('\n'), re))));
      } else if ((m = HEADING.exec(line))) {
        out.append(h('h' + Math.min(6, m[1].length + 2), { class: 'md-h' }, inline(m[2], re)));
        i++;
      } else if (RULE.test(line)) {
        out.append(h('hr'));
        i++;
      } else if (QUOTE.test(line)) {
        const body = [];
        for (; i < src.length && (m = QUOTE.exec(src[i])); i++) body.push(m[1]);
        out.append(h('blockquote', null, [...markdown(body.join('\n'), re).childNodes]));
      } else if ((m = ITEM.exec(line))) {
        const ordered = /\d/.test(m[2]);
        const list = h(ordered ? 'ol' : 'ul', ordered && parseInt(m[2], 10) !== 1 ? { start: parseInt(m[2], 10) } : null);
        while (i < src.length && (m = ITEM.exec(src[i])) && /\d/.test(m[2]) === ordered) {
          const body = [m[3]];
          // An item goes on over its indented lines.
          for (i++; i < src.length && /^\s{2,}\S/.test(src[i]) && !ITEM.test(src[i]); i++) body.push(src[i].trim());
          list.append(h('li', null, lines(body, re)));
        }
        out.append(list);
      } else if (line.includes('|') && i + 1 < src.length && TABLE_RULE.test(src[i + 1]) && src[i + 1].includes('-')) {
        const head = cells(line);
        const rows = [];
        for (i += 2; i < src.length && src[i].includes('|') && src[i].trim(); i++) rows.push(cells(src[i]));
        out.append(h('div', { class: 'scroll' }, h('table', { class: 'md-table' },
          h('thead', null, h('tr', null, head.map((c) => h('th', { scope: 'col' }, inline(c, re))))),
          h('tbody', null, rows.map((r) => h('tr', null, head.map((_, k) => h('td', null, inline(r[k] || '', re)))))))));
      } else {
        const body = [];
        for (; i < src.length && src[i].trim() && (!body.length || !starts(src[i])); i++) body.push(src[i]);
        out.append(h('p', null, lines(body, re)));
      }
    }
    return out;
  }

  // ------------------------------------------------------------------------------------------
  // Session titles
  // ------------------------------------------------------------------------------------------

  // A session's title by the catalog's rule (the server's), so a session is called the same
  // everywhere: its first chunk's `title` in the metadata, else that chunk's first line, cut
  // at TITLE_CHARS characters. Null when it has no words.
  function titleOf(chunks) {
    const c = chunks[0];
    if (!c) return null;
    const t = c.metadata && c.metadata.title;
    if (typeof t === 'string' && t.trim()) return [...t.trim()].slice(0, TITLE_CHARS).join('');
    const line = [...(String(c.content || '').split('\n').find((l) => l.trim()) || '').trim()];
    if (!line.length) return null;
    return line.length > TITLE_CHARS ? line.slice(0, TITLE_CHARS).join('') + '…' : line.join('');
  }

  // Titles of the sessions this view shows, read once each (forgotten on navigation).
  const titles = new Map();
  function sessionTitle(id) {
    if (!titles.has(id)) {
      titles.set(id, call('POST', '/fetch', { session_id: id, position: 0, limit: 1 })
        .then((d) => titleOf(d.chunks), () => null));
    }
    return titles.get(id);
  }

  // ------------------------------------------------------------------------------------------
  // Sessions
  // ------------------------------------------------------------------------------------------

  async function viewSessions(r, live) {
    const project = r.params.get('project') || '';
    const days = r.params.get('days') || '30';
    const offset = Math.max(0, parseInt(r.params.get('offset'), 10) || 0);
    const projectInput = h('input', { id: 'f-project', name: 'project', value: project, list: 'projects', placeholder: 'any' });
    const windows = [['1', 'last day'], ['7', 'last 7 days'], ['30', 'last 30 days'], ['90', 'last 90 days'], ['365', 'last year'], ['0', 'all time']];
    if (!windows.some(([v]) => v === days)) windows.splice(windows.length - 1, 0, [days, `last ${days} days`]);
    const daysSelect = h('select', { id: 'f-days', name: 'days' },
      windows.map(([v, t]) => h('option', { value: v, selected: v === days }, t)));
    const datalist = h('datalist', { id: 'projects' });
    const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter sessions',
      onsubmit: (ev) => {
        ev.preventDefault();
        location.hash = link('sessions', null, { project: projectInput.value.trim(), days: daysSelect.value });
      } },
    h('label', { for: 'f-project' }, 'Project', projectInput), datalist,
    h('label', { for: 'f-days' }, 'Active in', daysSelect),
    h('button', { type: 'submit' }, 'Apply'));
    daysSelect.addEventListener('change', () => form.requestSubmit());
    const results = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading sessions…'));
    replace(main, h('h1', null, 'Sessions'), form, results);

    // The catalog of every time too, to say what the window hides (and whether there is
    // anything at all).
    const [data, every] = await Promise.all([
      call('GET', '/overview?' + query({ days, project, offset, limit: CATALOG_PAGE })),
      days === '0' ? null : call('GET', '/overview?' + query({ days: 0, project, limit: 1 })),
    ]);
    if (!live()) return;
    const projects = new Set(data.sessions.map((s) => s.project).filter(Boolean));
    replace(datalist, [...projects].sort().map((p) => h('option', { value: p })));
    const all = every ? every.total : data.total;
    const hidden = all - data.total;
    const windowName = (windows.find(([v]) => v === days) || [days, `last ${days} days`])[1];
    const showAll = h('a', { href: link('sessions', null, { project, days: 0 }), id: 'show-all' }, 'Show all time');
    const windowNote = days === '0' ? null : h('p', { class: 'note', id: 'window-note' },
      `Showing sessions active in the ${windowName}`,
      hidden ? [`; ${hidden} older session${hidden === 1 ? ' is' : 's are'} hidden. `, showAll] : '.');
    if (!all && !project) {
      replace(results, h('div', { class: 'card', id: 'empty-store' },
        h('p', null, h('strong', null, 'This memory has no sessions yet.')),
        h('p', null, 'Sessions are what you and your agents said, saved chunk by chunk. To add some:'),
        h('ul', null,
          h('li', null, 'bring in the history you already have: ', h('code', null, 'memdir import claude-code'), ' (or codex, opencode)'),
          h('li', null, 'save sessions as they happen: ', h('code', null, 'memdir config --client claude --hooks')),
          h('li', null, 'or save a note: ', h('code', null, 'memdir ingest --session-id notes --text "…"'))),
        h('p', { class: 'muted' }, 'Then reload this page.')));
    } else if (!all) {
      replace(results, h('p', { class: 'muted', id: 'no-sessions' }, `No session belongs to project “${project}”. `,
        h('a', { href: link('sessions', null, { days }) }, 'Show every project')));
    } else if (!data.sessions.length) {
      replace(results, windowNote, h('p', { class: 'muted', id: 'no-sessions' }, data.total ? 'No more sessions.' : `No session was active in the ${windowName}.`));
    } else {
      replace(results, windowNote,
        h('p', { class: 'muted' }, `${offset + 1}–${offset + data.sessions.length} of ${data.total} sessions, newest first`),
        h('ul', { class: 'list', id: 'session-list' }, data.sessions.map((s) => h('li', { class: 'card' },
          h('a', { href: link('session', s.id), class: 'session-link' }, s.title || s.id),
          h('div', { class: 'meta' },
            s.project ? h('span', { class: 'badge' }, s.project) : null,
            h('span', null, `${s.message_count} chunk${s.message_count === 1 ? '' : 's'}`),
            h('span', null, 'last active ', time(s.last_active)),
            s.title ? h('span', { class: 'mono' }, s.id) : null)))),
        pager(offset > 0 ? link('sessions', null, { project, days, offset: Math.max(0, offset - CATALOG_PAGE) }) : null,
          data.next_offset != null ? link('sessions', null, { project, days, offset: data.next_offset }) : null));
    }
    performance.mark('memdir:sessions-rendered');
  }

  function pager(prev, next) {
    return h('nav', { class: 'pager', 'aria-label': 'Pages' },
      prev ? h('a', { class: 'button secondary', href: prev, rel: 'prev' }, '← Previous') : null,
      next ? h('a', { class: 'button secondary', href: next, rel: 'next' }, 'Next →') : null);
  }

  async function viewSession(r, live) {
    const id = r.arg || '';
    const position = Math.max(0, parseInt(r.params.get('position'), 10) || 0);
    const hit = r.params.get('hit');
    const re = matcher(r.params.get('q'), r.params.get('engine'));
    const back = h('p', null, h('a', { href: link('sessions') }, '← Sessions'));
    replace(main, back, h('h1', null, 'Session'), h('p', { class: 'muted' }, 'Loading…'));
    const data = await call('POST', '/fetch', { session_id: id, position, limit: SESSION_PAGE });
    if (!live()) return;
    if (position === 0 && !titles.has(id)) titles.set(id, Promise.resolve(titleOf(data.chunks)));
    const title = await sessionTitle(id);
    if (!live()) return;
    const first = data.chunks.length ? data.chunks[0].position : position;
    const last = data.chunks.length ? data.chunks[data.chunks.length - 1].position : position;
    const items = data.chunks.map((c) => {
      const role = c.metadata && typeof c.metadata.role === 'string' ? c.metadata.role : null;
      const kind = role === 'user' || role === 'assistant' ? role : role ? 'other' : 'none';
      const isHit = hit != null && String(c.position) === hit;
      return h('li', { class: `card chunk role-${kind}` + (isHit ? ' hit' : ''), id: 'c-' + c.position, 'data-role': role,
        tabindex: isHit ? '-1' : null, 'data-autofocus': isHit ? '' : null, 'aria-current': isHit ? 'true' : null },
      h('div', { class: 'meta' }, role ? h('span', { class: 'role' }, role) : null, h('span', null, '#' + c.position),
        c.project ? h('span', { class: 'badge' }, c.project) : null, time(c.ts)),
      markdown(c.content, re));
    });
    replace(main, back,
      h('h1', null, title || h('span', { class: 'mono' }, id)),
      h('p', { class: 'meta' }, h('span', null, 'Session ', h('code', { id: 'session-id' }, id))),
      h('p', { class: 'muted' }, data.total ? `Chunks ${first}–${last} of ${data.total}` : 'This session has no chunks.'),
      h('ol', { class: 'list', id: 'chunks' }, items),
      pager(position > 0 ? link('session', id, { position: Math.max(0, position - SESSION_PAGE) }) : null,
        data.next_position != null ? link('session', id, { position: data.next_position }) : null));
    const target = hit != null && document.getElementById('c-' + hit);
    if (target) target.scrollIntoView({ block: 'center' });
  }

  // ------------------------------------------------------------------------------------------
  // Search
  // ------------------------------------------------------------------------------------------

  // The number of hits when none is asked for: the server's default (api::defaults).
  const SEARCH_LIMIT = 5;
  const SEARCH_FIELDS = ['q', 'mode', 'kind', 'project', 'session', 'category', 'since', 'until', 'limit', 'context', 'full'];
  let searchAbort = null;

  async function viewSearch(r, live) {
    const p = (k, d = '') => r.params.get(k) || d;
    const field = (name, text, attrs) => {
      const input = h('input', Object.assign({ id: 's-' + name, name, value: p(name) }, attrs || {}));
      return [h('label', { for: 's-' + name }, text, input), input];
    };
    const q = h('input', { id: 'q', type: 'search', name: 'q', value: p('q'), placeholder: 'Search sessions and categories',
      'aria-label': 'Search', autocomplete: 'off', spellcheck: 'false', 'data-autofocus': '' });
    const mode = h('select', { id: 's-mode', name: 'mode', 'aria-label': 'Mode' },
      [['auto', 'auto'], ['bm25', 'words (BM25)'], ['exact', 'exact']].map(([v, t]) => h('option', { value: v, selected: p('mode', 'auto') === v }, t)));
    const kind = h('select', { id: 's-kind', name: 'kind' },
      [['', 'sessions and categories'], ['chunk', 'sessions only'], ['category', 'categories only']].map(([v, t]) => h('option', { value: v, selected: p('kind') === v }, t)));
    const [projectL, project] = field('project', 'Project');
    const [sessionL, session] = field('session', 'Session');
    const [categoryL, category] = field('category', 'Category');
    const [sinceL, since] = field('since', 'Since', { placeholder: 'YYYY-MM-DD' });
    const [untilL, until] = field('until', 'Until', { placeholder: 'YYYY-MM-DD' });
    const [limitL, limit] = field('limit', 'Hits', { type: 'number', min: 1, max: 1000, placeholder: String(SEARCH_LIMIT) });
    const [contextL, context] = field('context', 'Context chunks', { type: 'number', min: 0, max: 20, placeholder: '3' });
    const full = h('input', { id: 's-full', type: 'checkbox', name: 'full', checked: p('full') === 'true' });
    const filtersOpen = ['kind', 'project', 'session', 'category', 'since', 'until', 'limit', 'context', 'full'].some((k) => r.params.get(k));
    const summary = h('p', { id: 'search-summary', class: 'muted', 'aria-live': 'polite' });
    const results = h('div', { id: 'results' });
    const form = h('form', { role: 'search', 'aria-label': 'Search memory', onsubmit: (ev) => { ev.preventDefault(); run(0); } },
      h('div', { class: 'searchbar' }, q, mode, h('button', { type: 'submit' }, 'Search')),
      h('details', { open: filtersOpen }, h('summary', null, 'Filters'),
        h('div', { class: 'row' }, h('label', { for: 's-kind' }, 'Look in', kind), projectL, sessionL, categoryL, sinceL, untilL, limitL, contextL,
          h('label', { class: 'check', for: 's-full' }, full, 'full text'))));
    replace(main, h('h1', null, 'Search'), form,
      h('p', { class: 'muted' }, 'Results come as you type. Press ', h('span', { class: 'kbd' }, '/'), ' anywhere to search.'), summary, results);

    const values = () => ({ q: q.value, mode: mode.value === 'auto' ? '' : mode.value, kind: kind.value, project: project.value.trim(),
      session: session.value.trim(), category: category.value.trim(), since: since.value.trim(), until: until.value.trim(),
      limit: limit.value, context: context.value, full: full.checked ? 'true' : '' });

    let timer = 0;
    let seq = 0;
    async function run(delay) {
      clearTimeout(timer);
      const mine = ++seq;
      if (delay) {
        await new Promise((res) => { timer = setTimeout(res, delay); });
        if (mine !== seq || !live()) return;
      }
      const v = values();
      history.replaceState(null, '', link('search', null, Object.fromEntries(SEARCH_FIELDS.map((k) => [k, v[k]]))));
      if (searchAbort) searchAbort.abort();
      if (!v.q.trim()) {
        replace(summary);
        replace(results);
        return;
      }
      // Without a number of hits the server's default applies, as on the CLI and over MCP.
      const body = { query: v.q };
      if (v.limit) body.limit = Number(v.limit);
      if (v.mode) body.mode = v.mode;
      for (const k of ['kind', 'project', 'category', 'since', 'until']) if (v[k]) body[k] = v[k];
      if (v.session) body.session_id = v.session;
      if (v.context !== '') body.context = Number(v.context);
      if (v.full) body.full = true;
      body.explain = true;
      const abort = new AbortController();
      searchAbort = abort;
      let res;
      try {
        res = await timed('POST', '/search', body, abort.signal);
      } catch (e) {
        if (e.name === 'AbortError' || mine !== seq || !live()) return;
        replace(summary);
        replace(results, errorBox(e));
        return;
      }
      if (mine !== seq || !live()) return;
      const d = res.data;
      const named = new Map(await Promise.all([...new Set(d.results.filter((x) => x.kind !== 'category').map((x) => x.session_id))]
        .map(async (sid) => [sid, await sessionTitle(sid)])));
      if (mine !== seq || !live()) return;
      const ms = Math.round(res.ms);
      summary.dataset.ms = String(res.ms);
      replace(summary, `${d.count} hit${d.count === 1 ? '' : 's'} · engine ${d.engine} · ${ms} ms`);
      const re = matcher(d.query, d.engine);
      replace(results, d.results.length
        ? h('ol', { class: 'list', id: 'hits' }, d.results.map((hit) => renderHit(hit, d, re, named.get(hit.session_id))))
        : h('p', { class: 'muted' }, 'No hits.' + (d.notes ? ' ' + d.notes.join(' ') : '')));
      performance.mark('memdir:search-answered');
    }

    q.addEventListener('input', () => run(TYPE_DELAY_MS));
    for (const el of [mode, kind, full]) el.addEventListener('change', () => run(0));
    for (const el of [project, session, category, since, until, limit, context]) el.addEventListener('input', () => run(TYPE_DELAY_MS * 2));
    if (q.value.trim()) await run(0);
  }

  function explain(hit, d, re) {
    const found = new Set();
    for (const m of String(hit.content).matchAll(re || /$^/g)) found.add(m[0].toLowerCase());
    return h('details', { class: 'explain' }, h('summary', null, 'Why this hit'),
      h('ul', null,
        h('li', null, `Engine: ${d.engine}` + (d.mode ? ` (mode ${d.mode})` : '')),
        h('li', null, `Score: ${Number(hit.score).toFixed(4)}` + (d.engine === 'exact' ? ' (the phrase, verified byte for byte)' : ' (BM25; a match in the turn before counts half)')),
        hit.explain && d.engine !== 'exact' ? h('li', null, 'Parts: ' + ['bm25', 'neighbour', 'session', 'dense', 'fused']
          .filter((k) => typeof hit.explain[k] === 'number')
          .map((k) => `${k} ${hit.explain[k].toFixed(3)}`).join(' · ') + ` = ${hit.explain.formula}`) : null,
        h('li', null, 'Matching words: ', found.size ? [...found].join(', ') : 'none in the excerpt (the match is in the previous turn or past the cut)'),
        hit.kind === 'chunk' ? h('li', null, 'Chunk ', h('code', null, hit.chunk_id))
          : hit.kind === 'note' ? h('li', null, 'Note ', h('code', null, hit.path), ` lines ${hit.lines[0]}–${hit.lines[1]}`)
            : h('li', null, 'Key ', h('code', null, hit.key_path)),
        hit.truncated ? h('li', null, 'The text is an excerpt around the matching words; turn on “full text” for all of it.') : null,
        (d.notes || []).map((n) => h('li', null, n))));
  }

  function renderHit(hit, d, re, title) {
    if (hit.kind === 'note') {
      return h('li', { class: 'card hit-card', 'data-kind': 'note' },
        h('div', { class: 'hit-head' },
          h('a', { href: link('note', hit.path, { lines: hit.lines.join('-') }), class: 'hit-link' }, hit.path),
          hit.heading ? h('span', null, hit.heading) : null,
          h('span', { class: 'muted' }, `lines ${hit.lines[0]}–${hit.lines[1]}`), h('span', { class: 'badge' }, 'note')),
        h('div', { class: 'md' }, markdown(hit.content, re)),
        h('div', { class: 'meta' }, h('span', null, 'updated ', time(hit.updated_at), ' by ', hit.updated_by)),
        explain(hit, d, re));
    }
    if (hit.kind === 'category') {
      return h('li', { class: 'card hit-card', 'data-kind': 'category' },
        h('div', { class: 'hit-head' },
          h('a', { href: link('category', hit.category, { key: hit.key_path }), class: 'hit-link' }, hit.category),
          h('code', null, hit.key_path), h('span', { class: 'badge' }, 'category')),
        h('pre', null, highlight(hit.content, re)),
        h('div', { class: 'meta' }, h('span', null, 'updated ', time(hit.updated_at), ' by ', hit.updated_by)),
        explain(hit, d, re));
    }
    // The window lists each neighbour once ({position, text}); the hit goes in its place.
    const ctx = (hit.context || []).map((c) => ({ position: c.position, text: c.text ?? c.content }))
      .concat([{ position: hit.position, text: hit.content, hit: true }])
      .sort((a, b) => a.position - b.position);
    return h('li', { class: 'card hit-card', 'data-kind': 'chunk' },
      h('div', { class: 'hit-head' },
        h('a', { class: 'hit-link', href: link('session', hit.session_id,
          { position: Math.max(0, hit.position - 5), hit: hit.position, q: d.query, engine: d.engine }) },
        title || hit.session_id, ' #', String(hit.position)),
        title ? h('code', { class: 'session-id' }, hit.session_id) : null,
        hit.project ? h('span', { class: 'badge' }, hit.project) : null, time(hit.ts)),
      superseded(hit),
      h('ol', { class: 'list ctx' }, ctx.map((c) => h('li', { class: c.hit ? 'self' : null },
        h('span', { class: 'pos' }, '#' + c.position), highlight(c.text, re)))),
      explain(hit, d, re));
  }

  // A chunk a later chunk corrects: say so, and link to each correction.
  function superseded(hit) {
    if (!hit.superseded_by || !hit.superseded_by.length) return null;
    return h('p', { class: 'superseded' }, h('span', { class: 'badge bad' }, 'superseded'), ' corrected by ',
      hit.superseded_by.map((uri, i) => {
        const m = /^memdir:\/\/sessions\/([^/]+)\/(\d+)$/.exec(uri);
        let id = m ? m[1] : uri;
        try { id = decodeURIComponent(id); } catch (_) { /* keep as is */ }
        const pos = m ? Number(m[2]) : 0;
        return [i ? ', ' : null, m
          ? h('a', { href: link('session', id, { position: Math.max(0, pos - 5), hit: pos }) }, id, ' #', String(pos))
          : h('code', null, uri)];
      }));
  }

  // ------------------------------------------------------------------------------------------
  // Notes
  // ------------------------------------------------------------------------------------------

  async function viewNotes(r, live) {
    replace(main, h('h1', null, 'Notes'), h('p', { class: 'muted' }, 'Loading…'));
    const data = await call('GET', '/api/v1/notes');
    if (!live()) return;
    const files = data.notes.filter((n) => !n.path.endsWith('/'));
    replace(main, h('h1', null, 'Notes'),
      files.length ? h('div', { class: 'scroll' }, h('table', { class: 'stack', id: 'note-table' },
        h('thead', null, h('tr', null, ['Path', 'Size', 'Modified'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, files.map((n) => h('tr', null,
          h('td', { 'data-label': 'Path' }, h('a', { href: link('note', n.path) }, n.path)),
          h('td', { class: 'num', 'data-label': 'Size' }, bytes(n.size)),
          h('td', { 'data-label': 'Modified' }, time(n.modified || null)))))))
        : h('p', { class: 'muted' }, 'No notes yet. Agents write them with the memory tool or note_write; memdir note write PATH adds one.'));
  }

  async function viewNote(r, live) {
    const path = r.arg || '';
    const tab = r.params.get('tab') || 'content';
    const tabs = h('nav', { class: 'tabs', 'aria-label': 'Note views' },
      [['content', 'Content'], ['history', 'History'], ['diff', 'Diff']].map(([t, text]) =>
        h('a', { href: link('note', path, { tab: t === 'content' ? '' : t }), 'aria-current': t === tab ? 'page' : null }, text)));
    const body = h('div', { id: 'note-body' }, h('p', { class: 'muted' }, 'Loading…'));
    replace(main, h('p', null, h('a', { href: link('notes') }, '← Notes')), h('h1', null, path), tabs, body);
    if (tab === 'history') return noteHistory(path, body, live);
    if (tab === 'diff') return noteDiff(path, r, body, live);
    return noteContent(path, r, body, live);
  }

  async function noteHash(path) {
    try {
      return (await call('POST', '/api/v1/notes/read', { path })).hash;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return 'absent';
      throw e;
    }
  }

  async function noteContent(path, r, body, live) {
    const version = r.params.get('version');
    const d = await call('POST', '/api/v1/notes/read', version ? { path, version } : { path });
    if (!live()) return;
    const parts = [h('div', { class: 'meta' }, h('span', null, `version ${d.version}`), h('span', null, 'hash ', short(d.hash)),
      h('span', null, 'written ', time(d.updated_at), ' by ', d.updated_by), h('span', null, `${d.lines} lines`))];
    const lines = r.params.get('lines');
    if (lines) parts.push(h('p', { class: 'muted' }, 'The search hit is at lines ', h('code', null, lines), '.'));
    if (!d.current) {
      const current = await noteHash(path);
      if (!live()) return;
      const box = h('div');
      parts.push(h('div', { class: 'alert warn' }, `This is version ${d.version}, not the current one. `,
        h('a', { href: link('note', path) }, 'Current version'), ' · ',
        h('button', { type: 'button', class: 'link', onclick: () => replace(box, restoreForm(path, String(d.version), current, box, true)) }, 'Restore this version…')), box);
    }
    const raw = h('pre', { id: 'note-raw', hidden: true }, d.text);
    const rendered = h('div', { class: 'md card', id: 'note-rendered' }, markdown(d.text, null));
    parts.push(h('p', null, h('button', { type: 'button', class: 'secondary', onclick: () => { raw.hidden = !raw.hidden; rendered.hidden = !rendered.hidden; } }, 'Rendered / plain text')), rendered, raw);
    replace(body, parts);
  }

  async function noteHistory(path, body, live) {
    const [hist, current] = await Promise.all([call('POST', '/api/v1/notes/history', { path, limit: 200 }), noteHash(path)]);
    if (!live()) return;
    const box = h('div', { id: 'restore-box' });
    const rows = hist.versions.map((v, i) => {
      const older = hist.versions[i + 1];
      const ref = versionRef(v);
      return h('tr', { 'data-version': ref },
        h('td', { class: 'num', 'data-label': 'Version' }, v.version != null ? String(v.version) : '?'),
        h('td', { 'data-label': 'Op' }, v.malformed ? h('span', { class: 'badge bad' }, 'malformed') : (v.op || '')),
        h('td', { 'data-label': 'By' }, v.actor || ''),
        h('td', { 'data-label': 'When' }, time(v.timestamp)),
        h('td', { 'data-label': 'Reason' }, v.reason || v.malformed || ''),
        h('td', { 'data-label': 'Hash' }, short(v.hash)),
        h('td', { 'data-label': 'Actions' },
          v.hash && !v.malformed ? h('a', { href: link('note', path, { version: ref }) }, 'view') : null, ' ',
          older ? h('a', { href: link('note', path, { tab: 'diff', from: versionRef(older), to: ref }) }, 'diff') : null, ' ',
          (i > 0 || !hist.exists) && v.hash && !v.malformed ? h('button', { type: 'button', class: 'link restore', 'data-version': ref,
            onclick: () => { replace(box, restoreForm(path, ref, current, box, true)); box.scrollIntoView({ block: 'nearest' }); } }, 'restore…') : null));
    });
    replace(body,
      h('p', { class: 'muted' }, `${hist.total} version${hist.total === 1 ? '' : 's'}, newest first${hist.exists ? '' : '; deleted'}`),
      box,
      h('div', { class: 'scroll' }, h('table', { class: 'stack', id: 'history-table' },
        h('thead', null, h('tr', null, ['Version', 'Op', 'By', 'When', 'Reason', 'Hash', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, rows))));
  }

  async function noteDiff(path, r, body, live) {
    const req = { path };
    if (r.params.get('from')) req.from = r.params.get('from');
    if (r.params.get('to')) req.to = r.params.get('to');
    const d = await call('POST', '/api/v1/notes/diff', req);
    if (!live()) return;
    const lines = d.diff ? d.diff.replace(/\n$/, '').split('\n') : [];
    replace(body,
      h('p', { class: 'muted' }, `From ${d.from == null ? 'nothing' : 'version ' + d.from} to version ${d.to}`),
      lines.length ? h('pre', { class: 'diff', id: 'diff' }, lines.map((l) => h('span', {
        class: l.startsWith('@@') ? 'hunk' : l.startsWith('+') && !l.startsWith('+++') ? 'add' : l.startsWith('-') && !l.startsWith('---') ? 'del' : null,
      }, l))) : h('p', { class: 'muted', id: 'diff' }, 'The two versions are the same.'));
  }

  // ------------------------------------------------------------------------------------------
  // Categories
  // ------------------------------------------------------------------------------------------

  async function viewCategories(r, live) {
    replace(main, h('h1', null, 'Categories'), h('p', { class: 'muted' }, 'Loading…'));
    const data = await call('GET', '/api/v1/list');
    if (!live()) return;
    const cats = [...data.categories].sort((a, b) => (a.status === 'ok') - (b.status === 'ok') || a.name.localeCompare(b.name));
    replace(main, h('h1', null, 'Categories'),
      cats.length ? h('div', { class: 'scroll' }, h('table', { class: 'stack', id: 'category-table' },
        h('thead', null, h('tr', null, ['Name', 'Kind', 'Version', 'Size', 'Updated', 'By'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, cats.map((c) => h('tr', null,
          h('td', { 'data-label': 'Name' }, h('a', { href: link('category', c.name) }, c.name), ' ',
            c.status !== 'ok' ? h('span', { class: 'badge bad' }, c.status) : null),
          h('td', { 'data-label': 'Kind' }, c.kind),
          h('td', { class: 'num', 'data-label': 'Version' }, String(c.version)),
          h('td', { class: 'num', 'data-label': 'Size' }, bytes(c.size_bytes)),
          h('td', { 'data-label': 'Updated' }, time(c.updated_at)),
          h('td', { 'data-label': 'By' }, c.updated_by))))))
        : h('p', { class: 'muted' }, 'No categories yet.'));
  }

  async function viewCategory(r, live) {
    const name = r.arg || '';
    const tab = r.params.get('tab') || 'content';
    const tabs = h('nav', { class: 'tabs', 'aria-label': 'Category views' },
      [['content', 'Content'], ['history', 'History'], ['diff', 'Diff'], ['blame', 'Blame']].map(([t, text]) =>
        h('a', { href: link('category', name, { tab: t === 'content' ? '' : t }), 'aria-current': t === tab ? 'page' : null }, text)));
    const body = h('div', { id: 'category-body' }, h('p', { class: 'muted' }, 'Loading…'));
    replace(main, h('p', null, h('a', { href: link('categories') }, '← Categories')), h('h1', null, name), tabs, body);
    if (tab === 'history') return categoryHistory(name, body, live);
    if (tab === 'diff') return categoryDiff(name, r, body, live);
    if (tab === 'blame') return categoryBlame(name, r, body, live);
    return categoryContent(name, r, body, live);
  }

  // The hash the category has now, as the viewer last saw it ("absent" once deleted): what a
  // restore expects, so a change made meanwhile anywhere is a conflict instead of lost.
  async function currentHash(name) {
    try {
      return (await call('POST', '/api/v1/read', { category: name })).meta.hash;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return 'absent';
      throw e;
    }
  }

  async function categoryContent(name, r, body, live) {
    const version = r.params.get('version');
    const data = await call('POST', '/api/v1/read', version ? { category: name, version } : { category: name });
    if (!live()) return;
    const m = data.meta;
    const parts = [h('div', { class: 'meta' },
      h('span', null, `version ${m.version}`), h('span', { class: 'badge' }, m.kind), h('span', null, 'hash ', short(m.hash)),
      h('span', null, 'written ', time(m.updated_at), ' by ', m.updated_by), m.op ? h('span', null, 'by ', m.op) : null,
      m.size_bytes != null ? h('span', null, bytes(m.size_bytes)) : null)];
    const key = r.params.get('key');
    if (key) parts.push(h('p', { class: 'muted' }, 'The search hit is at ', h('code', null, key), '.'));
    if (!m.current) {
      const current = await currentHash(name);
      if (!live()) return;
      const box = h('div');
      parts.push(h('div', { class: 'alert warn' }, `This is version ${m.version}, not the current one. `,
        h('a', { href: link('category', name) }, 'Current version'), ' · ',
        h('button', { type: 'button', class: 'link', onclick: () => replace(box, restoreForm(name, String(m.version), current, box)) }, 'Restore this version…')), box);
    }
    const d = data.data;
    if (m.kind === 'log' && d && Array.isArray(d.entries)) {
      const ret = d._retention || {};
      parts.push(h('p', { class: 'muted' }, `${d.entries.length} entr${d.entries.length === 1 ? 'y' : 'ies'}, newest first; keeps `,
        ret.max_entries != null ? `${ret.max_entries} entries` : 'every entry',
        ret.max_age_days != null ? ` and ${ret.max_age_days} days` : ''));
      if (m.current) parts.push(appendForm(name));
      parts.push(h('ol', { class: 'list', id: 'log-entries' }, [...d.entries].reverse().map((e) => h('li', { class: 'card' },
        h('div', { class: 'meta' }, time(e.ts), h('code', null, e.id)), h('pre', null, JSON.stringify(e.data, null, 2))))));
    } else {
      parts.push(h('pre', { class: 'card', id: 'category-json' }, JSON.stringify(d, null, 2)));
    }
    replace(body, parts);
  }

  function appendForm(name) {
    const entry = h('textarea', { id: 'append-data', name: 'data', rows: 3, placeholder: '{"event": "…"}', spellcheck: 'false' });
    const reason = h('input', { id: 'append-reason', name: 'reason', placeholder: 'optional' });
    const out = h('div', { 'aria-live': 'polite' });
    return h('details', { class: 'card' }, h('summary', null, 'Append an entry'),
      h('form', { onsubmit: async (ev) => {
        ev.preventDefault();
        let data;
        try { data = JSON.parse(entry.value); } catch (e) { replace(out, h('p', { class: 'error', role: 'alert' }, 'The entry is not JSON: ' + e.message)); return; }
        try {
          const req = { category: name, data };
          if (reason.value.trim()) req.reason = reason.value.trim();
          await call('POST', '/api/v1/append', req);
          toast('Entry appended');
          render(false);
        } catch (e) { replace(out, errorBox(e)); }
      } },
      h('label', { for: 'append-data' }, 'Entry (a JSON object)', entry),
      h('label', { for: 'append-reason' }, 'Reason', reason), out,
      h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Append'))));
  }

  function restoreForm(name, version, expected, box, note) {
    const reason = h('input', { id: 'restore-reason', name: 'reason', placeholder: 'optional' });
    const hash = h('input', { id: 'restore-hash', name: 'expected_hash', value: expected || 'absent', class: 'mono', spellcheck: 'false', size: 40 });
    const out = h('div', { id: 'restore-result', 'aria-live': 'polite' });
    const form = h('form', { class: 'card', id: 'restore-form', 'aria-label': `Restore version ${version}`, onsubmit: async (ev) => {
      ev.preventDefault();
      const req = { [note ? 'path' : 'category']: name, version, reason: reason.value.trim() || `restored from version ${version} in the viewer` };
      if (hash.value.trim()) req.expected_hash = hash.value.trim();
      submit.disabled = true;
      try {
        const res = await call('POST', note ? '/api/v1/notes/restore' : '/api/v1/restore', req);
        toast(`Restored version ${note ? version : res.restored_from} as version ${res.version}`);
        render(false);
      } catch (e) {
        submit.disabled = false;
        const parts = [errorBox(e)];
        if (e instanceof ApiError && e.status === 409) {
          parts.push(h('p', null, `The ${note ? 'note' : 'category'} changed since this page read it. `,
            h('button', { type: 'button', class: 'secondary', onclick: () => render(false) }, 'Reload and review')));
        }
        replace(out, parts);
      }
    } },
    h('h2', null, `Restore version ${version}`),
    h('p', { class: 'muted' }, `Writes that version's content as a new version. It only happens if the ${note ? 'note' : 'category'} still has the hash below, so a change made meanwhile (by an agent, another device or a hand edit) is never overwritten.`),
    h('label', { for: 'restore-hash' }, 'Expected current hash', hash),
    h('label', { for: 'restore-reason' }, 'Reason', reason), out);
    const submit = h('button', { type: 'submit', id: 'restore-submit' }, 'Restore');
    form.append(h('div', { class: 'row' }, submit, h('button', { type: 'button', class: 'secondary', onclick: () => replace(box) }, 'Cancel')));
    setTimeout(() => reason.focus(), 0);
    return form;
  }

  function versionRef(v) {
    return v.version != null ? String(v.version) : v.id;
  }

  async function categoryHistory(name, body, live) {
    const [hist, current] = await Promise.all([call('POST', '/api/v1/history', { category: name, limit: 200 }), currentHash(name)]);
    if (!live()) return;
    const box = h('div', { id: 'restore-box' });
    const rows = hist.versions.map((v, i) => {
      const older = hist.versions[i + 1];
      const ref = versionRef(v);
      return h('tr', { 'data-version': ref },
        h('td', { class: 'num', 'data-label': 'Version' }, v.version != null ? String(v.version) : '?'),
        h('td', { 'data-label': 'Op' }, v.malformed ? h('span', { class: 'badge bad' }, 'malformed') : (v.op || '')),
        h('td', { 'data-label': 'By' }, v.actor || ''),
        h('td', { 'data-label': 'When' }, time(v.timestamp)),
        h('td', { 'data-label': 'Reason' }, v.reason || v.malformed || ''),
        h('td', { 'data-label': 'Hash' }, short(v.hash)),
        h('td', { 'data-label': 'Actions' },
          v.hash && !v.malformed ? h('a', { href: link('category', name, { version: ref }) }, 'view') : null, ' ',
          older ? h('a', { href: link('category', name, { tab: 'diff', from: versionRef(older), to: ref }) }, 'diff') : null, ' ',
          i > 0 && v.hash && !v.malformed ? h('button', { type: 'button', class: 'link restore', 'data-version': ref,
            onclick: () => { replace(box, restoreForm(name, ref, current, box)); box.scrollIntoView({ block: 'nearest' }); } }, 'restore…') : null));
    });
    replace(body,
      h('p', { class: 'muted' }, `${hist.total} version${hist.total === 1 ? '' : 's'}, newest first; status ${hist.status}`),
      box,
      h('div', { class: 'scroll' }, h('table', { class: 'stack', id: 'history-table' },
        h('thead', null, h('tr', null, ['Version', 'Op', 'By', 'When', 'Reason', 'Hash', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, rows))));
  }

  async function categoryDiff(name, r, body, live) {
    const hist = await call('POST', '/api/v1/history', { category: name, limit: 200 });
    if (!live()) return;
    const versions = hist.versions.filter((v) => !v.malformed);
    const to = r.params.get('to') || (versions[0] ? versionRef(versions[0]) : '');
    const from = r.params.get('from') || (versions[1] ? versionRef(versions[1]) : '');
    const opts = (sel) => versions.map((v) => h('option', { value: versionRef(v), selected: versionRef(v) === sel },
      `v${v.version} · ${v.op || ''} · ${v.timestamp ? new Date(v.timestamp).toLocaleString() : ''}`));
    const fromSel = h('select', { id: 'diff-from', name: 'from' }, h('option', { value: '', selected: !from }, '(nothing)'), opts(from));
    const toSel = h('select', { id: 'diff-to', name: 'to' }, opts(to));
    const out = h('div', { id: 'diff-out' }, h('p', { class: 'muted' }, 'Loading…'));
    replace(body,
      h('form', { class: 'filters', 'aria-label': 'Versions to compare', onsubmit: (ev) => {
        ev.preventDefault();
        location.hash = link('category', name, { tab: 'diff', from: fromSel.value, to: toSel.value });
      } },
      h('label', { for: 'diff-from' }, 'From', fromSel), h('label', { for: 'diff-to' }, 'To', toSel),
      h('button', { type: 'submit', id: 'diff-show' }, 'Show diff')),
      out);
    if (!to) { replace(out, h('p', { class: 'muted' }, 'No versions to compare.')); return; }
    const req = { category: name, to };
    if (from) req.from = from;
    const d = await call('POST', '/api/v1/diff', req);
    if (!live()) return;
    const lines = d.diff ? d.diff.replace(/\n$/, '').split('\n') : [];
    replace(out,
      h('p', { class: 'muted' }, `From ${d.from == null ? 'nothing' : 'version ' + d.from} to version ${d.to}`),
      lines.length ? h('pre', { class: 'diff', id: 'diff' }, lines.map((l) => h('span', {
        class: l.startsWith('@@') ? 'hunk' : l.startsWith('+') && !l.startsWith('+++') ? 'add' : l.startsWith('-') && !l.startsWith('---') ? 'del' : null,
      }, l))) : h('p', { class: 'muted', id: 'diff' }, 'The two versions are the same.'));
  }

  // A JSON Pointer's parts, and one part as it is written in a pointer.
  function pointerParts(path) {
    return path ? path.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~')) : [];
  }

  function pointerPart(key) {
    return '/' + key.replace(/~/g, '~0').replace(/\//g, '~1');
  }

  // A value in one line, cut short; the whole of it in the title.
  function jsonBrief(value, max) {
    const text = JSON.stringify(value);
    const s = text === undefined ? String(value) : text;
    return h('code', { title: s.length > max ? s : null }, s.length > max ? s.slice(0, max - 1) + '…' : s);
  }

  // Blame: for each key of the category (or of the object at `path`), the version that set its
  // current value. A key whose value is an object can be blamed inside.
  async function categoryBlame(name, r, body, live) {
    const path = r.params.get('path') || '';
    const parts = pointerParts(path);
    const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Blamed object', id: 'blame-path' },
      parts.length ? h('a', { href: link('category', name, { tab: 'blame' }) }, 'top level') : h('span', { 'aria-current': 'location' }, 'top level'),
      parts.map((p, i) => {
        const at = parts.slice(0, i + 1).map(pointerPart).join('');
        return [' / ', i < parts.length - 1 ? h('a', { href: link('category', name, { tab: 'blame', path: at }) }, p)
          : h('code', { 'aria-current': 'location' }, p)];
      }));
    const out = h('div', { id: 'blame-out' }, h('p', { class: 'muted' }, 'Loading…'));
    replace(body, crumbs, out);
    let b;
    try {
      b = await call('POST', '/api/v1/blame', path ? { category: name, path } : { category: name });
    } catch (e) {
      if (!live()) return;
      if (e instanceof ApiError && e.status === 401) throw e;
      replace(out, errorBox(e));
      return;
    }
    if (!live()) return;
    const rows = b.keys.map((k) => {
      const v = String(k.version);
      const versionLink = h('a', { href: link('category', name, { version: v }), title: `Version ${v}: ${k.id}` }, v);
      const inside = k.value && typeof k.value === 'object' && !Array.isArray(k.value);
      return h('tr', { 'data-key': k.key, 'data-version': v },
        h('td', { 'data-label': 'Key' }, h('code', null, k.key)),
        h('td', { class: 'blame-value', 'data-label': 'Value' }, jsonBrief(k.value, 60)),
        h('td', { class: 'num blame-version', 'data-label': 'Version' }, k.at_least
          ? h('span', { title: 'An older version\'s content was forgotten or compacted: the value may be older than this version.' }, 'at least version ', versionLink)
          : versionLink),
        h('td', { 'data-label': 'Op' }, k.op || ''),
        h('td', { 'data-label': 'By' }, k.actor || ''),
        h('td', { 'data-label': 'When' }, time(k.timestamp)),
        h('td', { class: 'blame-reason', 'data-label': 'Reason' }, k.reason || ''),
        h('td', { 'data-label': inside ? 'Actions' : null }, inside ? h('a', { class: 'blame-inside', href: link('category', name, { tab: 'blame', path: (path || '') + pointerPart(k.key) }),
          'aria-label': `Blame inside ${k.key}` }, 'blame inside') : null));
    });
    replace(out,
      h('p', { class: 'muted' }, `${b.keys.length} key${b.keys.length === 1 ? '' : 's'} at version ${b.version}; each with the version that set its current value`),
      rows.length ? h('div', { class: 'scroll' }, h('table', { class: 'stack', id: 'blame-table' },
        h('caption', { class: 'visually-hidden' }, `Blame of ${name}${path ? ' at ' + path : ''}`),
        h('thead', null, h('tr', null, ['Key', 'Value', 'Version', 'Op', 'By', 'When', 'Reason', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, rows))) : h('p', { class: 'muted', id: 'blame-empty' }, 'This object has no keys.'));
  }

  // ------------------------------------------------------------------------------------------
  // Status
  // ------------------------------------------------------------------------------------------

  async function viewStatus(r, live) {
    replace(main, h('h1', null, 'Status'), h('p', { class: 'muted' }, 'Loading…'));
    const s = await call('GET', '/status');
    if (!live()) return;
    const attention = h('ul', { id: 'attention' });
    const items = [];
    if (s.read_only) items.push(h('li', null, 'Served read-only: ', s.read_only));
    for (const c of s.malformed || []) items.push(h('li', null, 'Category ', h('a', { href: link('category', c, { tab: 'history' }) }, c), ' does not parse: fix the file or restore a version.'));
    for (const l of s.malformed_lines || []) items.push(h('li', null, 'Segment lines that do not parse: ', h('code', null, JSON.stringify(l))));
    for (const t of s.pending_staging || []) items.push(h('li', null, 'Staged transaction not yet recovered: ', h('code', null, t)));
    for (const n of s.notices || []) items.push(h('li', null, n));
    for (const c of s.conflicts || []) {
      items.push(h('li', { class: 'conflict' }, 'Category ', h('a', { href: link('category', c.category, { tab: 'history' }) }, c.category),
        ` has an open sync conflict (${c.kind}, ${c.heads.length} heads, ${c.strategy}): pick a version with `, h('code', null, `memdir resolve ${c.category} --pick VERSION`), '.'));
    }
    const ls = s.last_sync;
    if (ls && (ls.push_pending || ls.error)) {
      items.push(h('li', { id: 'sync-pending' }, `Sync with ${ls.remote} pending since ${ls.at}`, ls.error ? ': ' + ls.error : '', '.'));
    }
    // Categories neither written nor reviewed in 90 days (`stale`, absent on older servers): a
    // reminder rather than a fault, so it comes after every problem, verify-store's included.
    const staleN = Number.isInteger(s.stale) && s.stale > 0 ? s.stale : 0;
    const staleItem = staleN ? h('li', { id: 'stale' }, `${staleN} categor${staleN === 1 ? 'y' : 'ies'} not written or reviewed in 90 days: `,
      h('code', null, 'memdir review --stale 90'), ' lists them, and ', h('code', null, 'memdir review CATEGORY'), ' marks one as checked.') : null;
    const verifyBox = h('div', { id: 'verify' }, h('p', { class: 'muted' }, 'Checking the store (verify-store)…'));
    const attentionBox = h('section', { 'aria-labelledby': 'attention-title' }, h('h2', { id: 'attention-title' }, 'Needs attention'), attention);
    const showAttention = (pending) => {
      if (items.length || staleItem) {
        attentionBox.className = items.length ? 'alert' : 'alert warn';
        replace(attention, staleItem ? items.concat(staleItem) : items);
      } else {
        attentionBox.className = pending ? 'card' : 'alert ok';
        replace(attention, h('li', null, pending ? 'Checking…' : 'Nothing: files, history, ledger and index agree.'));
      }
    };
    showAttention(true);
    const stat = (n, t) => h('div', { class: 'stat' }, h('b', null, String(n)), t);
    replace(main, h('h1', null, 'Status'), attentionBox,
      h('h2', null, 'Store'),
      h('div', { class: 'grid' }, stat(s.sessions, 'sessions'), stat(s.chunks, 'chunks'), stat(s.categories, 'categories'),
        stat(s.logs, 'logs'), stat(bytes(s.size_bytes), 'on disk')),
      h('div', { class: 'card' }, h('dl', null,
        h('dt', null, 'Directory'), h('dd', null, h('code', null, s.dir), s.dir_source ? ` (${s.dir_source})` : ''),
        s.replica ? [h('dt', null, 'Replica'), h('dd', null, h('code', null, s.replica))] : null,
        s.actor ? [h('dt', null, 'Device'), h('dd', null, s.actor)] : null,
        ls ? [h('dt', null, 'Last sync'), h('dd', { id: 'last-sync' }, `${ls.at} with ${ls.remote} (${ls.by}): `,
          ls.pushed ? 'in step' : 'pending', ls.reported ? `, ${ls.reported} problem${ls.reported === 1 ? '' : 's'} reported` : '')] : null,
        s.access ? [h('dt', null, 'Access'), h('dd', { id: 'access' }, `${s.access.device} (${s.access.role}): ${s.access.summary}`)] : null)),
      s.index ? h('details', { class: 'card' }, h('summary', null, 'Search index'), h('pre', null, JSON.stringify(s.index, null, 2))) : null,
      s.ledger ? h('details', { class: 'card' }, h('summary', null, 'Ledger'), h('pre', null, JSON.stringify(s.ledger, null, 2))) : null,
      h('h2', null, 'verify-store'), verifyBox);
    let v;
    try {
      v = await call('GET', '/api/v1/verify');
    } catch (e) {
      if (!live()) return;
      replace(verifyBox, errorBox(e));
      showAttention(false);
      return;
    }
    if (!live()) return;
    for (const p of v.problems) items.push(h('li', { class: 'problem' }, h('strong', null, p.kind), ' ', h('code', null, p.path), ': ', p.message));
    showAttention(false);
    const checked = v.checked && typeof v.checked === 'object' ? Object.entries(v.checked) : [];
    replace(verifyBox,
      h('p', null, v.ok ? h('span', { class: 'badge ok' }, 'ok') : h('span', { class: 'badge bad' }, `${v.problems.length} problem${v.problems.length === 1 ? '' : 's'}`),
        v.files_hash ? [' files hash ', short(v.files_hash)] : null),
      checked.length ? h('table', null, h('tbody', null, checked.map(([k, n]) => h('tr', null, h('th', { scope: 'row' }, k.replace(/_/g, ' ')),
        h('td', { class: 'num' }, typeof n === 'object' ? JSON.stringify(n) : String(n)))))) : null);
  }

  render(false);
})();
