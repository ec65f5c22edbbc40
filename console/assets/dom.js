// DOM helpers of the console. Everything shown is built with DOM calls and textContent, never parsed from markup:
// key, team and model names and end users are chosen by others, and no name can become an element.

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// h builds an element: attrs are attributes (true: present, false/null: absent), "class" and "text" are shortcuts;
// kids are nodes or text.
export function h(tag, attrs, ...kids) {
  return build(document.createElement(tag), attrs, kids);
}

const SVGNS = 'http://www.w3.org/2000/svg';
export function s(tag, attrs, ...kids) {
  return build(document.createElementNS(SVGNS, tag), attrs, kids);
}

function build(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'text') el.textContent = v;
    else if (k === 'class') el.setAttribute('class', v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// bdi shows a text someone else chose (a key's, team's or model's name, an end user) in a <bdi>: its direction is
// its own, so that right-to-left letters in it, or a bidi control stored before the server refused them, cannot
// reorder the text around it (a number after an Arabic name would otherwise be drawn before it).
export function bdi(text, attrs) {
  return h('bdi', { ...attrs, text: String(text ?? '') });
}

// isolate is bdi for plain text, where no element can go (a title attribute, an aria-label, an SVG <title>): the
// text between FIRST STRONG ISOLATE (U+2068) and POP DIRECTIONAL ISOLATE (U+2069), which is what <bdi> does.
export function isolate(text) {
  return `\u2068${text ?? ''}\u2069`;
}

// quoted is a name in quotes, isolated: “name”.
export function quoted(name) {
  return ['“', bdi(name), '”'];
}

// say shows a message at the corner of the screen for a few seconds; parts are text or nodes (a name in its bdi).
export function say(parts, bad = false) {
  const el = h('div', { class: bad ? 'bad' : '' }, parts);
  $('#status').append(el);
  setTimeout(() => el.remove(), bad ? 9000 : 5000);
}

// debounce returns fn delayed until ms have passed without another call; .now() runs a pending call at once.
export function debounce(fn, ms) {
  let timer = 0;
  const d = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  d.now = (...args) => {
    clearTimeout(timer);
    fn(...args);
  };
  d.cancel = () => clearTimeout(timer);
  return d;
}
