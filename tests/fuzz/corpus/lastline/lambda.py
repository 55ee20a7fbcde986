lambda x=1: x
