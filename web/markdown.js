// Model output is untrusted: Markdown is rendered by marked with any raw HTML in it written
// out as text, then the result cleaned by DOMPurify (no scripts, no event handlers, no
// javascript: links, no styles) and handed to the DOM as a fragment — the page never assigns
// model text to innerHTML.
const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['style'],
  RETURN_DOM_FRAGMENT: true,
};

const escapeHtml = (s) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
let configured = false;

export function renderMarkdown(text) {
  if (!configured) {   // raw HTML blocks and inline tags of the reply: shown, never parsed
    window.marked.use({ renderer: { html: (html) => escapeHtml(typeof html === 'string' ? html : html.text) } });
    configured = true;
  }
  const html = window.marked.parse(text, { gfm: true, breaks: true, mangle: false, headerIds: false });
  const fragment = window.DOMPurify.sanitize(html, PURIFY);
  for (const a of fragment.querySelectorAll('a')) {
    a.rel = 'noopener noreferrer';
    a.target = '_blank';
  }
  return fragment;
}
