// The one DOM helper every view uses: el() builds an element from a tag,
// its attributes and its children. Needs a document (the page's; node's
// tests stub one, dashboard/test/imports_test.js).

// A new `tag` element. `attrs`: on* keys set the handler property, `text`
// the text content, `value` and `checked` the properties; any other key an
// attribute (true: present and empty); undefined, null and false are left
// out. `children`: nodes, or anything else as text, arrays flattened,
// null, undefined and false skipped.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node[key] = value;
    else if (key === 'text') node.textContent = value;
    else if (key === 'value') node.value = value;
    else if (key === 'checked') node.checked = value;
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}
