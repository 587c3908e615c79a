/*
 * vmtune.stacks._yamlnodes: libyaml's events straight into vmtune's yamldoc.Node objects.
 *
 * What it is for: reading a manifest through PyYAML's C loader makes a PyYAML node object, two
 * marks and a Python `resolve` call for every node, and yamldoc then converts those nodes into
 * Nodes; for 1,000 manifests that is about a quarter of a `vmtune check`. This module walks the
 * same parser's events (libyaml, which PyYAML's C loader already runs on the same input) and
 * makes the Nodes directly.
 *
 * What it is not: a YAML parser, or a second judge of what a file means. It reads only the
 * common shape of a manifest (mappings with string keys, sequences, scalars) and *declines*
 * everything else by returning None: anchors and aliases, tags, merge keys, keys that are not
 * strings, duplicate keys, nesting beyond max_depth, more than max_nodes nodes, any libyaml
 * error, any scalar whose typed value does not construct. yamldoc then reads the file with its
 * full loader, which gives the answer or the one-line error. A plain scalar's type comes from
 * Python (the `resolved` table and `resolve`, the same ones the full loader uses), and any
 * other type than str is constructed by `construct` (PyYAML's safe constructors), so a value
 * is typed exactly as the full loader types it. tests/test_yamlnodes.py holds the two readers
 * to the same Nodes on every YAML file of the repository and on mutations of them.
 *
 * Bounds: nesting is limited by max_depth (recursion is at most max_depth + 1 deep), the nodes
 * by max_nodes; libyaml reads the bytes given, which sources.MAX_INPUT_BYTES bounds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <yaml.h>

typedef struct {
    const unsigned char *first;     /* 128 bytes: 1 for a first character a resolver is registered for */
    const unsigned char *alphabets; /* 128 x 128: [first][c] 1 when one of those resolvers can match c */
    const unsigned char *plain_starts; /* 128 bytes: which plain values go to `plain` (wanted_plain) */
    PyObject *plain;                  /* list: the texts of those plain values, in file order */
    PyTypeObject *node_type;
    Py_ssize_t off_value, off_line, off_key_line, off_children;
    PyObject *resolved;   /* dict: plain text -> tag, filled by resolve() */
    PyObject *resolve;    /* resolve(text) -> tag of a plain scalar */
    PyObject *construct;  /* construct(tag, text) -> value, or decline */
    PyObject *str_tag;
    PyObject *decline;    /* what construct() returns for a value it cannot construct */
    long max_depth;
    long max_nodes;
    long nodes;
    int declined;
    yaml_parser_t parser;
} Reader;

/* The offset of a __slots__ member of Node: written directly, as the slot descriptor would. */
static int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset) {
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL)
        return -1;
    if (Py_TYPE(descr) != &PyMemberDescr_Type) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "Node.%s is not a slot", name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY)) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "Node.%s is not a writable object slot", name);
        return -1;
    }
    *offset = member->offset;
    Py_DECREF(descr);
    return 0;
}

static void set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) {
    /* `value` is a new reference, handed over; the slot of a new object is NULL. */
    *(PyObject **)((char *)obj + offset) = value;
}

/* A Node(value, line, key_line, children): every argument a new reference handed over
   (children may be Py_None, given as a new reference too). NULL with an exception on failure. */
static PyObject *make_node(Reader *r, PyObject *value, long line, long key_line, PyObject *children) {
    PyObject *line_obj = PyLong_FromLong(line);
    PyObject *key_obj = line_obj == NULL ? NULL : PyLong_FromLong(key_line);
    PyObject *node = key_obj == NULL ? NULL : r->node_type->tp_alloc(r->node_type, 0);
    if (node == NULL) {
        Py_XDECREF(line_obj);
        Py_XDECREF(key_obj);
        Py_DECREF(value);
        Py_DECREF(children);
        return NULL;
    }
    set_slot(node, r->off_value, value);
    set_slot(node, r->off_line, line_obj);
    set_slot(node, r->off_key_line, key_obj);
    set_slot(node, r->off_children, children);
    return node;
}

static int next_event(Reader *r, yaml_event_t *event) {
    if (!yaml_parser_parse(&r->parser, event)) {
        r->declined = 1; /* the full loader says what is wrong, and where */
        return 0;
    }
    return 1;
}

static PyObject *decline(Reader *r) {
    r->declined = 1;
    return NULL;
}

/* The tag of a plain scalar's text, as the full loader resolves it: a borrowed reference. */
static PyObject *plain_tag(Reader *r, PyObject *text, PyObject **owned) {
    PyObject *tag = PyDict_GetItemWithError(r->resolved, text);
    *owned = NULL;
    if (tag != NULL || PyErr_Occurred())
        return tag;
    *owned = PyObject_CallOneArg(r->resolve, text);
    return *owned;
}

static int equals(const unsigned char *s, Py_ssize_t n, const char *word) {
    /* the first character first: a key such as `name` or `networks` is tested against 27 words */
    return (unsigned char)word[0] == s[0] && (size_t)n == strlen(word) && memcmp(s, word, (size_t)n) == 0;
}

/* YAML 1.1's bool words (PyYAML's bool resolver matches these and only these). */
static const char *const TRUE_WORDS[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
static const char *const FALSE_WORDS[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", NULL};
static const char *const NULL_WORDS[] = {"~", "null", "Null", "NULL", NULL};
/* merge, value and yaml (`!`, `&`, `*` cannot start a plain scalar): resolve() types them */
static const char *const OTHER_WORDS[] = {"<<", "=", "!", "&", "*", NULL};

static int one_of(const unsigned char *s, Py_ssize_t n, const char *const *words) {
    for (; *words != NULL; words++)
        if (equals(s, n, *words))
            return 1;
    return 0;
}

/* The kind of a plain scalar told without PyYAML's resolver, where that is certain. The
   resolvers a first character may call (`first`): none (0), so the scalar is a str; only ones
   that match fixed words (1: bool, null, merge, value), so a scalar that is not one of them is a
   str; or the number resolvers (2: int, float, timestamp), whose expressions can match only the
   characters `alphabets` lists for that first character, and a decimal integer
   (`[-+]?(0|[1-9][0-9]*)`, which PyYAML's float expression cannot match, and its int one does).
   ASK: anything else (`<<`, floats, timestamps, octal, hex, `1_000`, a UUID): resolve() decides. */
enum plain { PLAIN_STR, PLAIN_TRUE, PLAIN_FALSE, PLAIN_NONE, PLAIN_INT, PLAIN_ASK };

static enum plain plain_kind(Reader *r, const unsigned char *s, Py_ssize_t n) {
    if (n == 0)
        return PLAIN_NONE; /* the empty plain scalar is null */
    if (s[0] >= 128 || r->first[s[0]] == 0)
        return PLAIN_STR;
    if (r->first[s[0]] == 1) {
        if (n > 5) /* longer than every word below ("false") */
            return PLAIN_STR;
        if (one_of(s, n, TRUE_WORDS))
            return PLAIN_TRUE;
        if (one_of(s, n, FALSE_WORDS))
            return PLAIN_FALSE;
        if (one_of(s, n, NULL_WORDS))
            return PLAIN_NONE;
        return one_of(s, n, OTHER_WORDS) ? PLAIN_ASK : PLAIN_STR;
    }
    const unsigned char *allowed = r->alphabets + 128 * s[0];
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] >= 128 || !allowed[s[i]])
            return PLAIN_STR;
    Py_ssize_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (i < n && ((s[i] == '0' && i + 1 == n) || (s[i] >= '1' && s[i] <= '9'))) {
        Py_ssize_t j = i + 1;
        while (j < n && s[j] >= '0' && s[j] <= '9')
            j++;
        if (j == n)
            return PLAIN_INT;
    }
    return PLAIN_ASK;
}

/* A scalar's text. libyaml checks its input's UTF-8 and refuses escapes to surrogates, so this
   does not fail; if it ever did, the full loader would say what is wrong. */
static PyObject *decode(Reader *r, const unsigned char *s, Py_ssize_t n) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return decline(r);
    }
    return text;
}

/* Short ASCII texts decoded before, shared: a manifest's keys ("name", "spec", "domain") and
   common values ("virtio", "disk") recur in every file, and 1,000 manifests decoded some 10^5
   copies of them, each an allocation kept to the end of the run (the documents are). A str is
   immutable: a shared one is the same value. Bounded: TEXT_SLOTS texts of at most TEXT_MAX
   bytes; a text takes the slot of its hash, replacing what was there. */
#define TEXT_SLOTS 2048 /* a power of two */
#define TEXT_MAX 40
static PyObject *texts[TEXT_SLOTS];

static PyObject *text_of(Reader *r, const unsigned char *s, Py_ssize_t n) {
    if (n > TEXT_MAX)
        return decode(r, s, n);
    unsigned int hash = 2166136261u, high = 0; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) {
        high |= s[i];
        hash = (hash ^ s[i]) * 16777619u;
    }
    if (high & 0x80)
        return decode(r, s, n); /* not ASCII: decoded, and checked, each time */
    PyObject **slot = &texts[hash & (TEXT_SLOTS - 1)];
    PyObject *seen = *slot;
    if (seen != NULL && PyUnicode_GET_LENGTH(seen) == n && memcmp(PyUnicode_1BYTE_DATA(seen), s, (size_t)n) == 0) {
        Py_INCREF(seen);
        return seen;
    }
    PyObject *text = decode(r, s, n);
    if (text != NULL && PyUnicode_IS_COMPACT_ASCII(text)) {
        Py_INCREF(text);
        Py_XSETREF(*slot, text);
    }
    return text;
}

/* A decimal integer's value; declined (the full loader says why) past 38 digits, where it may
   exceed the 128 bits yamldoc._INT_BITS allows (and Python's digit limit). */
static PyObject *decimal(Reader *r, const unsigned char *s, Py_ssize_t n) {
    if (n > 38)
        return decline(r);
    char small[64];
    char *text = n < (Py_ssize_t)sizeof small ? small : PyMem_Malloc((size_t)n + 1);
    if (text == NULL)
        return PyErr_NoMemory();
    memcpy(text, s, (size_t)n);
    text[n] = '\0';
    PyObject *value = PyLong_FromString(text, NULL, 10);
    if (text != small)
        PyMem_Free(text);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        return decline(r);
    }
    return value;
}

/* Whether a plain value's text goes to the `plain` list, by its first character's entry in
   plain_starts: 1, the scalar of that one character only; 2, any text but a decimal integer of
   at most 18 characters. What kubectl may type otherwise than YAML 1.1 starts so (`y`, `08`,
   `1e3`, `1:20`, 19 digits: vmtune.stacks.kubevirt.yamltypes), and a manifest has few such
   values: the text need not be searched for them. */
static int wanted_plain(Reader *r, const unsigned char *s, Py_ssize_t n, enum plain kind) {
    if (n == 0 || s[0] >= 128)
        return 0;
    switch (r->plain_starts[s[0]]) {
    case 1:
        return n == 1;
    case 2:
        return !(kind == PLAIN_INT && n <= 18);
    default:
        return 0;
    }
}

/* A scalar event's value (str, or the typed value of a plain scalar). NULL: declined or error. */
static PyObject *scalar_value(Reader *r, yaml_event_t *event) {
    if (event->data.scalar.anchor != NULL || event->data.scalar.tag != NULL)
        return decline(r);
    const unsigned char *s = event->data.scalar.value;
    Py_ssize_t n = (Py_ssize_t)event->data.scalar.length;
    enum plain kind = event->data.scalar.plain_implicit ? plain_kind(r, s, n) : PLAIN_STR;
    if (event->data.scalar.plain_implicit && wanted_plain(r, s, n, kind)) {
        PyObject *text = text_of(r, s, n);
        int failed = text == NULL || PyList_Append(r->plain, text) < 0;
        Py_XDECREF(text);
        if (failed)
            return NULL;
    }
    switch (kind) {
    case PLAIN_TRUE:
        Py_RETURN_TRUE;
    case PLAIN_FALSE:
        Py_RETURN_FALSE;
    case PLAIN_NONE:
        Py_RETURN_NONE;
    case PLAIN_INT:
        return decimal(r, s, n);
    default:
        break;
    }
    PyObject *text = text_of(r, s, n);
    if (text == NULL || kind == PLAIN_STR)
        return text; /* quoted, literal, folded, or plain and certainly a str */
    PyObject *owned;
    PyObject *tag = plain_tag(r, text, &owned);
    if (tag == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    int is_str = PyUnicode_Check(tag) ? PyUnicode_Compare(tag, r->str_tag) == 0 : 0;
    if (is_str) {
        Py_XDECREF(owned);
        return text;
    }
    if (PyErr_Occurred()) {
        Py_XDECREF(owned);
        Py_DECREF(text);
        return NULL;
    }
    PyObject *value = PyObject_CallFunctionObjArgs(r->construct, tag, text, NULL);
    Py_XDECREF(owned);
    Py_DECREF(text);
    if (value == r->decline) {
        Py_DECREF(value);
        return decline(r);
    }
    return value;
}

static PyObject *read_node(Reader *r, yaml_event_t *event, long key_line, long depth);

/* The key of a mapping entry: a str, from a scalar that is not typed otherwise. */
static PyObject *read_key(Reader *r, yaml_event_t *event) {
    if (event->type != YAML_SCALAR_EVENT || event->data.scalar.anchor != NULL || event->data.scalar.tag != NULL)
        return decline(r); /* a collection or alias as key, an anchored or tagged key */
    const unsigned char *s = event->data.scalar.value;
    Py_ssize_t n = (Py_ssize_t)event->data.scalar.length;
    enum plain kind = event->data.scalar.plain_implicit ? plain_kind(r, s, n) : PLAIN_STR;
    if (kind != PLAIN_STR && kind != PLAIN_ASK)
        return decline(r); /* `on:`, `~:`, `80:`: the full loader's rules for these */
    PyObject *text = text_of(r, s, n);
    if (text == NULL || kind == PLAIN_STR)
        return text;
    PyObject *owned;
    PyObject *tag = plain_tag(r, text, &owned);
    int is_str = tag != NULL && PyUnicode_Check(tag) && PyUnicode_Compare(tag, r->str_tag) == 0;
    Py_XDECREF(owned);
    if (tag == NULL || PyErr_Occurred()) {
        Py_DECREF(text);
        return NULL;
    }
    if (!is_str) { /* `<<` (merge), `80:`, `on:`, `~:`: the full loader's rules for these */
        Py_DECREF(text);
        return decline(r);
    }
    return text;
}

static PyObject *read_mapping(Reader *r, long line, long key_line, long depth) {
    PyObject *children = PyDict_New();
    PyObject *values = children == NULL ? NULL : PyDict_New();
    if (values == NULL) {
        Py_XDECREF(children);
        return NULL;
    }
    for (;;) {
        yaml_event_t event;
        if (!next_event(r, &event))
            goto fail;
        if (event.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&event);
            break;
        }
        long at = (long)event.start_mark.line + 1;
        PyObject *key = read_key(r, &event);
        yaml_event_delete(&event);
        if (key == NULL)
            goto fail;
        if (!next_event(r, &event)) {
            Py_DECREF(key);
            goto fail;
        }
        PyObject *child = read_node(r, &event, at, depth + 1);
        yaml_event_delete(&event);
        if (child == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        /* the key's one lookup both adds it and finds a duplicate (the value is read first: the
           file is declined all the same) */
        PyObject *had = PyDict_SetDefault(children, key, child);
        if (had != NULL && had != child) { /* a duplicate key: the full loader refuses it, with its line */
            r->declined = 1;
            had = NULL;
        }
        PyObject *value = *(PyObject **)((char *)child + r->off_value);
        int failed = had == NULL || PyDict_SetItem(values, key, value) < 0;
        Py_DECREF(key);
        Py_DECREF(child);
        if (failed)
            goto fail;
    }
    return make_node(r, values, line, key_line, children);
fail:
    Py_DECREF(children);
    Py_DECREF(values);
    return NULL;
}

static PyObject *read_sequence(Reader *r, long line, long key_line, long depth) {
    PyObject *children = PyList_New(0);
    PyObject *values = children == NULL ? NULL : PyList_New(0);
    if (values == NULL) {
        Py_XDECREF(children);
        return NULL;
    }
    for (;;) {
        yaml_event_t event;
        if (!next_event(r, &event))
            goto fail;
        if (event.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&event);
            break;
        }
        PyObject *child = read_node(r, &event, (long)event.start_mark.line + 1, depth + 1);
        yaml_event_delete(&event);
        if (child == NULL)
            goto fail;
        PyObject *value = *(PyObject **)((char *)child + r->off_value);
        int failed = PyList_Append(children, child) < 0 || PyList_Append(values, value) < 0;
        Py_DECREF(child);
        if (failed)
            goto fail;
    }
    return make_node(r, values, line, key_line, children);
fail:
    Py_DECREF(children);
    Py_DECREF(values);
    return NULL;
}

/* The Node an event starts (the caller deletes the event). NULL: declined, or an exception. */
static PyObject *read_node(Reader *r, yaml_event_t *event, long key_line, long depth) {
    long line = (long)event->start_mark.line + 1;
    if (depth > r->max_depth || ++r->nodes > r->max_nodes)
        return decline(r);
    switch (event->type) {
    case YAML_SCALAR_EVENT: {
        PyObject *value = scalar_value(r, event);
        if (value == NULL)
            return NULL;
        Py_INCREF(Py_None);
        return make_node(r, value, line, key_line, Py_None);
    }
    case YAML_MAPPING_START_EVENT:
        if (event->data.mapping_start.anchor != NULL || event->data.mapping_start.tag != NULL)
            return decline(r);
        return read_mapping(r, line, key_line, depth);
    case YAML_SEQUENCE_START_EVENT:
        if (event->data.sequence_start.anchor != NULL || event->data.sequence_start.tag != NULL)
            return decline(r);
        return read_sequence(r, line, key_line, depth);
    default: /* an alias */
        return decline(r);
    }
}

static PyObject *read_stream(Reader *r) {
    PyObject *roots = PyList_New(0);
    if (roots == NULL)
        return NULL;
    for (;;) {
        yaml_event_t event;
        if (!next_event(r, &event))
            break;
        yaml_event_type_t type = event.type;
        if (type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&event);
            return roots;
        }
        if (type == YAML_STREAM_START_EVENT || type == YAML_DOCUMENT_START_EVENT ||
            type == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&event);
            continue;
        }
        PyObject *root = read_node(r, &event, (long)event.start_mark.line + 1, 0);
        yaml_event_delete(&event);
        if (root == NULL)
            break;
        int failed = PyList_Append(roots, root) < 0;
        Py_DECREF(root);
        if (failed)
            break;
    }
    Py_DECREF(roots);
    return NULL;
}

static PyObject *read_yaml(PyObject *module, PyObject *args) {
    Py_buffer data;
    Reader r;
    memset(&r, 0, sizeof r);
    PyObject *node_type;
    const char *first, *alphabets, *plain_starts;
    Py_ssize_t first_len, alphabets_len, plain_starts_len;
    if (!PyArg_ParseTuple(args, "y*O!O!OOUOlly#y#y#O!", &data, &PyType_Type, &node_type, &PyDict_Type, &r.resolved,
                          &r.resolve, &r.construct, &r.str_tag, &r.decline, &r.max_depth, &r.max_nodes, &first,
                          &first_len, &alphabets, &alphabets_len, &plain_starts, &plain_starts_len, &PyList_Type,
                          &r.plain))
        return NULL;
    if (first_len != 128 || alphabets_len != 128 * 128 || plain_starts_len != 128) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "the resolver tables are 128 and 128 x 128 bytes, plain_starts 128");
        return NULL;
    }
    r.first = (const unsigned char *)first;
    r.alphabets = (const unsigned char *)alphabets;
    r.plain_starts = (const unsigned char *)plain_starts;
    r.node_type = (PyTypeObject *)node_type;
    if (slot_offset(r.node_type, "value", &r.off_value) < 0 || slot_offset(r.node_type, "line", &r.off_line) < 0 ||
        slot_offset(r.node_type, "key_line", &r.off_key_line) < 0 ||
        slot_offset(r.node_type, "children", &r.off_children) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (!yaml_parser_initialize(&r.parser)) {
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    yaml_parser_set_input_string(&r.parser, (const unsigned char *)data.buf, (size_t)data.len);
    yaml_parser_set_encoding(&r.parser, YAML_UTF8_ENCODING);
    PyObject *roots = read_stream(&r);
    yaml_parser_delete(&r.parser);
    PyBuffer_Release(&data);
    if (roots == NULL && r.declined && !PyErr_Occurred())
        Py_RETURN_NONE;
    return roots;
}

static PyMethodDef methods[] = {
    {"read", read_yaml, METH_VARARGS,
     "read(data, Node, resolved, resolve, construct, str_tag, decline, max_depth, max_nodes, first, alphabets, "
     "plain_starts, plain) -> list of root Nodes, or None: declined, the full loader reads the file; the texts of "
     "the plain values plain_starts asks for are appended to the list plain"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_yamlnodes", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__yamlnodes(void) { return PyModule_Create(&module); }
