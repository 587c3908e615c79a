/*
 * vmtune.stacks.kubevirt._fields: STK003's walk (vmtune/stacks/kubevirt/fields.py) in C.
 *
 * Every manifest check walks its VMI spec's `domain` against the fields of KubeVirt's API: about
 * 13 mappings and 20 keys a VM, each key a dictionary lookup and a type test. In Python that was
 * a quarter of what rendering the domain costs (8 % of a run over 1,000 manifests beyond
 * checking their domains). This is the same walk and nothing more: fields._walk is the
 * reference, used where this module is not built, and tests/test_kubevirt_fields.py holds the
 * two to the same paths on every spec of the fixtures and on mutations of them.
 *
 * unknown_keys(value, fields) -> list of paths (tuples of keys and list indices from `value`),
 * in document order, of each key that `fields` does not define there: a key that is not a str
 * is given as its str(), and nothing below an unknown key is looked at. A list's items are read
 * with the fields of the list; a known key is descended into when its fields are a dict and its
 * value a mapping or a list. Bounded by the interpreter's recursion limit (YAML nests at most
 * yamldoc.MAX_DEPTH deep).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* (*path, key): a new reference, NULL with an exception. `key` is borrowed. */
static PyObject *extended(PyObject *path, PyObject *key) {
    Py_ssize_t n = PyTuple_GET_SIZE(path);
    PyObject *out = PyTuple_New(n + 1);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(path, i);
        Py_INCREF(item);
        PyTuple_SET_ITEM(out, i, item);
    }
    Py_INCREF(key);
    PyTuple_SET_ITEM(out, n, key);
    return out;
}

static int walk(PyObject *value, PyObject *fields, PyObject *path, PyObject *found);

/* walk() one level down, at (*path, key): 0, or -1 with an exception. */
static int descend(PyObject *value, PyObject *fields, PyObject *path, PyObject *key, PyObject *found) {
    PyObject *below = extended(path, key);
    if (below == NULL)
        return -1;
    int rc = -1;
    if (Py_EnterRecursiveCall(" in the KubeVirt field walk") == 0) {
        rc = walk(value, fields, below, found);
        Py_LeaveRecursiveCall();
    }
    Py_DECREF(below);
    return rc;
}

static int walk(PyObject *value, PyObject *fields, PyObject *path, PyObject *found) {
    if (PyList_Check(value)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
            PyObject *item = PyList_GET_ITEM(value, i);
            if (!PyDict_Check(item) && !PyList_Check(item))
                continue; /* a scalar item holds no key */
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL)
                return -1;
            Py_INCREF(item);
            int rc = descend(item, fields, path, index, found);
            Py_DECREF(item);
            Py_DECREF(index);
            if (rc < 0)
                return -1;
        }
        return 0;
    }
    if (!PyDict_Check(value))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &pos, &key, &item)) {
        PyObject *sub = NULL; /* borrowed */
        if (PyUnicode_Check(key)) {
            sub = PyDict_GetItemWithError(fields, key);
            if (sub == NULL && PyErr_Occurred())
                return -1;
        }
        if (sub == NULL) { /* not a field here: its path, with the key as text */
            PyObject *text = PyObject_Str(key);
            PyObject *where = text == NULL ? NULL : extended(path, text);
            Py_XDECREF(text);
            int failed = where == NULL || PyList_Append(found, where) < 0;
            Py_XDECREF(where);
            if (failed)
                return -1;
            continue;
        }
        if (!PyDict_Check(sub) || (!PyDict_Check(item) && !PyList_Check(item)))
            continue; /* a scalar or free-form field (None), or a scalar value */
        Py_INCREF(item);
        int rc = descend(item, sub, path, key, found);
        Py_DECREF(item);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static PyObject *unknown_keys(PyObject *module, PyObject *args) {
    PyObject *value, *fields;
    if (!PyArg_ParseTuple(args, "OO!", &value, &PyDict_Type, &fields))
        return NULL;
    PyObject *found = PyList_New(0);
    PyObject *root = found == NULL ? NULL : PyTuple_New(0);
    if (root == NULL) {
        Py_XDECREF(found);
        return NULL;
    }
    int rc = walk(value, fields, root, found);
    Py_DECREF(root);
    if (rc < 0) {
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

static PyMethodDef methods[] = {
    {"unknown_keys", unknown_keys, METH_VARARGS,
     "unknown_keys(value, fields) -> paths of the keys of value that fields does not define, in document order"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fields", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fields(void) { return PyModule_Create(&module); }
