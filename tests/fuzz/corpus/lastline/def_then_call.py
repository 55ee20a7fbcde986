def f():
    return 1

f()
