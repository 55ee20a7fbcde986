@d
class C:
    a: int = 1
